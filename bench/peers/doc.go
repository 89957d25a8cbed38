// Command peers measures idemlog against its peers on the same workloads,
// in the same run, alternating between them, and reports each figure with
// its ratio to the reference measured in the same round (see README.md for
// the commands). Like the engine, it runs on Linux only.
//
// peers kafka: the Kafka listener (kafka.Server on an engine in a temp
// directory) against franz-go's kfake, both in this process on
// 127.0.0.1:0, driven by one kgo client with kgo's defaults (idempotent,
// acks=all, ProducerLinger(0)): 1 KiB random values, 1 and 4 partitions,
// idempotent and transactional produce, then a read_committed consume of
// the same records from a fresh client. Every target starts fresh for
// every run (no data, a collected heap). Per phase: records/s, the whole
// process's CPU time per record (client and broker share the process;
// on a shared machine CPU time moves much less than wall time), per-record
// and per-request latency. -cpuprofile writes one profile per target,
// case and phase of the first round; broker goroutines carry the label
// side=server, so `go tool pprof -tagfocus side=server` shows the broker
// alone and `-tags` its share.
//
// peers storage: the storage engines alone, each on a fresh directory:
// idemlog's engine in-process (idempotent Producer.Send), the same engine
// behind its Kafka listener, kfake with disk persistence, NATS JetStream
// (embedded, file storage, Nats-Msg-Id deduplication), pebble's WAL
// writer (also over a zero-filled file, as a recycled WAL), and the raw
// baseline (pwrite into a fallocated file, fdatasync per batch when
// syncing; also into a file zero-filled before the run, and into one its
// writes extend). Besides records/s, each run reports the bytes the
// device holding its directory wrote per second (/sys/dev/block), framing
// and journal included: on a quiet machine, the figure to compare where
// the device bounds a workload. Records of 100 B
// and 1 KiB, 100 per batch, under three durabilities: no sync, a sync per
// batch (one writer), and group commit (16 writers at once, each batch
// acknowledged once synced; raw then writes and syncs every batch queued
// while its previous sync ran); ratios to idemlog, raw and raw-zeroed.
package main
