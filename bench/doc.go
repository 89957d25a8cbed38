// Package bench is idemlog's load generator: producers append record
// batches to an embedded engine, plainly (Partition.Append) or as
// idempotent producers (Producer.Send), while readers may tail the
// partitions; it reports throughput, per-batch latency percentiles (HDR
// histograms, one per producer, merged at the end), allocations and CPU
// time per record, fdatasync calls, the bytes the device wrote, a
// per-second timeline, and the machine's raw write speed on the same
// bytes and directory with the ratio between the two. The engine and that
// baseline alternate in short slices over the run (interleaved), so that
// both meet the same page cache and the same neighbours; the ratio is
// pooled over the pairs of slices, their own spread beside it. A run is
// bounded in bytes by default (retention), and the baseline's files are
// bounded alike. `idemlog bench` is its command line.
package bench
