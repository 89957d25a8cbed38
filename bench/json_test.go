//go:build linux

package bench

import (
	"testing"
	"time"
)

// The timeline's samples must add up to the run's records: a run's last
// records, acknowledged within 10 ms after the last tick, are dropped from
// the timeline (sampler.loop skips a final sample shorter than 10 ms).
func TestTimelineAddsUpToRecords(t *testing.T) {
	defer func(d time.Duration) { sampleInterval = d }(sampleInterval)
	sampleInterval = 2 * time.Millisecond
	c := small(t)
	c.Batch = 10
	c.Records = 20000
	c.BaselineMax = 0
	res := mustRun(t, c)
	var sum int64
	for _, s := range res.Timeline {
		sum += s.Records
	}
	last := res.Timeline[len(res.Timeline)-1]
	if sum != res.Records || last.T != res.Seconds {
		t.Errorf("timeline: %d samples adding up to %d records, last at t=%.6f s; the run: %d records in %.6f s",
			len(res.Timeline), sum, last.T, res.Records, res.Seconds)
	}
}

// bytes must not depend on --retention-bytes when retention deletes
// nothing: without it, Bytes is read back from the log (transaction
// markers included); with it, it is the producers' count (markers left
// out).
func TestBytesIndependentOfRetention(t *testing.T) {
	var got [2]*Result
	for i, ret := range []int64{0, 1 << 40} {
		c := small(t)
		c.Mode = "transactional"
		c.TxnBatches = 4
		c.Batch = 7
		c.Records = 1000
		c.BaselineMax = 0
		c.RetentionBytes = ret
		got[i] = mustRun(t, c)
		if got[i].SegmentsDeleted != 0 {
			t.Fatalf("retention %d deleted %d segments", ret, got[i].SegmentsDeleted)
		}
	}
	if got[0].Records != got[1].Records || got[0].Batches != got[1].Batches || got[0].Bytes != got[1].Bytes {
		t.Errorf("same workload, no segment deleted: without retention %d records %d batches %d bytes; with --retention-bytes %d records %d batches %d bytes",
			got[0].Records, got[0].Batches, got[0].Bytes, got[1].Records, got[1].Batches, got[1].Bytes)
	}
}

// Under fsync always each partition syncs its own file at the same time as
// the others: the write+fdatasync baseline writes and syncs as many files
// at once, each its share, or several partitions look faster than the
// machine (ratio 2.9 with 2 partitions before).
func TestBaselineSyncWritersPerPartition(t *testing.T) {
	c := small(t)
	c.Fsync = "always"
	c.Producers, c.Partitions = 4, 4
	c.Records = 4000
	c.Batch = 10
	res := mustRun(t, c)
	bl := res.Baseline
	if bl.When != "interleaved" {
		t.Fatalf("baseline %q, want measured", bl.When)
	}
	if bl.SyncWriters != 4 {
		t.Errorf("sync_writers %d, want 4 (one per partition written)", bl.SyncWriters)
	}
	if bl.WriteFdatasyncBytes <= 0 || bl.WriteFdatasyncBytesPerSec <= 0 {
		t.Errorf("write+fdatasync baseline %d bytes at %.0f B/s", bl.WriteFdatasyncBytes, bl.WriteFdatasyncBytesPerSec)
	}
}
