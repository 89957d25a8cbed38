//go:build linux

package bench

import (
	"context"
	"testing"
	"time"
)

// TestReopenCrashedTxnFewerProducers: a transactional run with two
// producers (bench-0, bench-1, both on partition 0) crashed while bench-1
// had a transaction open. The dir is reopened by a transactional run with
// one producer and a read_committed reader: bench-1's leftover transaction
// is never ended (fenceLeftoverTxns skips transactional runs, which fence
// only their own ids), so it holds the last stable offset, and the reader
// reports done without having read any of this run's committed records.
func TestReopenCrashedTxnFewerProducers(t *testing.T) {
	c := small(t)
	c.Mode, c.Producers, c.Partitions, c.Records = "transactional", 2, 1, 1000
	c.BaselineMax = 0
	first := mustRun(t, c)

	crashMidTxn(t, c.Dir, "bench-1")

	c.Producers, c.Records, c.Readers, c.Isolation = 1, 1000, 1, "read_committed"
	start := time.Now()
	second, err := Run(context.Background(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := first.Records + second.Records; second.ReadRecords != want {
		t.Errorf("read_committed reader read %d records in %v; committed: %d (earlier run) + %d (this run) = %d",
			second.ReadRecords, time.Since(start).Round(time.Millisecond), first.Records, second.Records, want)
	}
}

// TestReopenCrashedTxnBytes: bytes are "the record batches' bytes
// as they lie in the log" written by this run. A transactional run on a dir
// whose earlier run crashed mid-transaction counts the ABORT marker that
// ending the earlier transaction writes (its producers' InitProducerID runs
// after the start offsets are taken), so the same workload reports more
// bytes, and partition offsets advance by more, than on a fresh dir; with
// --retention-bytes (bytes from the producers' own count) it would not.
func TestReopenCrashedTxnBytes(t *testing.T) {
	c := small(t)
	c.Mode, c.Producers, c.Partitions, c.Records, c.Batch = "transactional", 1, 1, 1000, 100
	c.BaselineMax = 0
	fresh := mustRun(t, c)

	crashMidTxn(t, c.Dir, "bench-0")

	again := mustRun(t, c)
	po0, po1 := fresh.PartitionOffsets[0], again.PartitionOffsets[0]
	if again.Records != fresh.Records || again.Bytes != fresh.Bytes || po1.EndOffset-po1.StartOffset != po0.EndOffset-po0.StartOffset {
		t.Errorf("same workload: fresh dir %d records, %d bytes, offsets +%d; after a crashed transaction %d records, %d bytes, offsets +%d",
			fresh.Records, fresh.Bytes, po0.EndOffset-po0.StartOffset, again.Records, again.Bytes, po1.EndOffset-po1.StartOffset)
	}
}
