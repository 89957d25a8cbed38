package main

import (
	"context"
	"io"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestDiskBytesAreDeviceBytes: disk_mb_per_sec is what the device
// wrote. It was write_bytes of /proc/self/io, which counts a whole folio
// (up to 2 MiB) each time a clean one is dirtied again: raw-zeroed's file,
// zero-filled in 1 MiB writes, sits in large folios, and each small write
// after an fdatasync counted as one, 74x the payload (8157 disk MB/s
// against 111 payload MB/s; the device wrote 12 MB where the figure said
// 479). Now the device's own count: raw-zeroed, 100 B x 100 per batch, a
// sync per batch, writes over written blocks, so the device writes the
// payload, the partial pages at either end of each sync again, and
// next to nothing for the journal. The filesystem is synced first, so
// that no earlier test's dirty pages land in the run.
func TestDiskBytesAreDeviceBytes(t *testing.T) {
	dir := t.TempDir()
	if _, ok := diskWriteBytes(dir); !ok {
		t.Fatalf("no device write count for %s", dir)
	}
	const records, size, perBatch = 50000, 100, 100
	c := StorageConfig{Records: records, PerBatch: perBatch, MaxTime: time.Minute, Dir: dir}
	w := workload{Size: size, PerBatch: perBatch, Sync: true, Writers: 1, Records: records}
	unix.Sync()
	run, err := storageOnce(c, rawZeroedPeer, w, 0)
	if err != nil {
		t.Fatal(err)
	}
	ph := run.Phase
	disk := ph.DiskMBPerSec * 1e6 * ph.Seconds
	syncs := records / perBatch
	bound := 1.5*float64(ph.PayloadBytes) + float64(syncs*2*4096) + 1<<20
	t.Logf("payload %d B, disk figure %.0f B (%.1f disk MB/s, %.1f payload MB/s)", ph.PayloadBytes, disk, ph.DiskMBPerSec, ph.MBPerSec)
	if disk < float64(ph.PayloadBytes) || disk > bound {
		t.Errorf("raw-zeroed, sync per batch: disk_mb_per_sec says %.0f bytes went to the device, %.1fx the payload; "+
			"want at least the payload and at most %.0f (payload + two pages per sync + room for the journal)", disk, disk/float64(ph.PayloadBytes), bound)
	}
}

// `peers storage -peers "raw, idemlog"` runs both (indexPeer trims each
// name) but summarizes over the untrimmed names (c.Peers): " idemlog"
// matches no run, so idemlog, the reference, silently drops out of the
// table and the JSON summary though it ran and raw shows a ratio to it.
// (`peers kafka -targets` has the same split: kafkaTargets trims,
// summarizeKafka gets c.Targets untrimmed.) Fix: trim when splitting.
func TestStorageSummaryKeepsEveryPeerRun(t *testing.T) {
	c := StorageConfig{Records: 400, Sizes: []int{100}, PerBatch: 100, Durabilities: []string{"none"}, Writers: 1,
		MaxTime: 10 * time.Second, Rounds: 1, Dir: t.TempDir(), Peers: []string{"raw", " idemlog"}}
	rep, err := runStorage(context.Background(), c, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ran, summarized := map[string]bool{}, map[string]bool{}
	for _, r := range rep.Runs {
		ran[r.Peer] = true
	}
	for _, s := range rep.Summary {
		summarized[s.Target] = true
	}
	for p := range ran {
		if !summarized[p] {
			t.Errorf("peer %q ran but is missing from the summary (table and JSON): summary has %v", p, summarized)
		}
	}
}
