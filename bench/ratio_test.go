//go:build linux

package bench

import "testing"

// TestRatioBytesPolicyComparedWithSync: under --fsync bytes=N an
// appender that crosses N bytes waits for an fdatasync (partition.SyncBytes);
// with bytes=1 every batch waits for its own sync, as under always. The
// run's syncs are observed and the baseline's sync group is taken from
// them, yet the ratio divides by the plain write(2) figure (page cache, no
// sync), and the write+fdatasync figure in the same group size is measured
// for only half a second as "informative".
func TestRatioBytesPolicyComparedWithSync(t *testing.T) {
	c := small(t)
	c.Producers, c.Partitions, c.Records, c.Batch = 1, 1, 2000, 10
	c.Fsync = "bytes=1"
	res := mustRun(t, c)
	bl := res.Baseline
	if bl.SyncGroupSource != "observed" || res.SyncsObserved == 0 {
		t.Fatalf("no syncs observed under bytes=1: %+v", bl)
	}
	if bl.ComparedWith != "write_fdatasync" {
		t.Errorf("--fsync bytes=1 (a sync per batch, %d syncs observed, group %d): ratio %.3f compared with %q (%.0f B/s), not write_fdatasync (%.0f B/s)",
			res.SyncsObserved, bl.SyncGroup, res.RatioToBaseline, bl.ComparedWith, bl.WriteBytesPerSec, bl.WriteFdatasyncBytesPerSec)
	}
}
