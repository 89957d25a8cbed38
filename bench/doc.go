// Package bench is idemlog's load generator: producers append record
// batches to an embedded engine, plainly (Partition.Append) or as
// idempotent producers (Producer.Send), while readers may tail the
// partitions; it reports throughput, per-batch latency percentiles (HDR
// histograms, one per producer, merged at the end), allocations per batch,
// a per-second timeline, and the machine's raw write speed on the same
// bytes and directory, measured in the same run, with the ratio between
// the two. `idemlog bench` is its command line.
package bench
