package engine

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/idemlog/idemlog/partition"
	"github.com/idemlog/idemlog/producer"
	"github.com/idemlog/idemlog/segment"
)

// TestReplaySnapshotWriteDiskFull: a rebuild (after a crash that
// left segments without snapshots, as before today's change) whose
// snapshot writes at the missing segment bases run out of space fails the
// open, and leaves the files usable: once space returns the next open
// rebuilds, writes the snapshots, and every producer's retry is a
// duplicate.
func TestReplaySnapshotWriteDiskFull(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if err := unix.Mount("tmpfs", root, "tmpfs", 0, "size=16m"); err != nil {
		t.Fatalf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(root, unix.MNT_DETACH) })
	dir := filepath.Join(root, "data")
	opts := Options{Partition: partition.Options{Segment: segment.Options{MaxBytes: 64 << 10, IndexMaxBytes: 4096, ReserveAhead: 4096}}}
	e := openEngine(t, dir, opts)
	if err := e.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	p, _ := e.Partition("t", 0)
	now := time.Now().UnixMilli()
	var sent [][]byte
	for pid := int64(1); pid <= 3000; pid++ {
		b := idem(t, pid, 0, 0, 1, now)
		if _, err := p.Append(b); err != nil {
			t.Fatal(err)
		}
		sent = append(sent, b)
	}
	pdir := filepath.Join(dir, "t-0")
	bases := snapshotBases(t, pdir)
	if len(bases) < 3 {
		t.Fatalf("setup: segments %v", bases)
	}
	e.kill()
	for _, b := range bases[1:] {
		os.Remove(filepath.Join(pdir, segment.FileName(b, ".snapshot")))
	}
	os.Remove(filepath.Join(pdir, "recovery-point-offset-checkpoint"))
	// Fill the disk, then give back about one and a half full images.
	filler := filepath.Join(root, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	st, _ := f.Stat()
	f.Close()
	if err := os.Truncate(filler, st.Size()-200<<10); err != nil {
		t.Fatal(err)
	}
	if e, err := Open(dir, opts); err == nil {
		snaps, _ := producer.ListSnapshots(pdir)
		e.Close()
		t.Fatalf("setup: open succeeded on the nearly full disk (snapshots %v)", snaps)
	} else {
		snaps, _ := producer.ListSnapshots(pdir)
		t.Logf("open on a full disk: %v (segments %v, snapshots %v)", err, bases, snaps)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	e = openEngine(t, dir, opts)
	defer e.Close()
	p, _ = e.Partition("t", 0)
	for i, b := range sent {
		r, err := p.Append(b)
		if err != nil || !r.Duplicate || r.BaseOffset != int64(i) {
			t.Fatalf("retry of producer %d after the failed and the good rebuild: %+v %v, want a duplicate at %d", i+1, r, err, i)
		}
	}
}
