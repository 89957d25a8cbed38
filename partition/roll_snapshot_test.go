package partition

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/segment"
)

// rollSnapshotFill fills the filesystem holding dir to the last byte and
// returns the filler's path.
func rollSnapshotFill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	for {
		if _, err := f.Write(buf[:512]); err != nil {
			break
		}
	}
	for {
		if _, err := f.Write(buf[:1]); err != nil {
			break
		}
	}
	return path
}

// rollSnapshotNames lists dir's file names.
func rollSnapshotNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// TestRollSnapshotDiskFull: a full disk when the roll writes its
// producer snapshot fails the append with ErrNoSpace and changes nothing;
// once space returns the next append rolls and succeeds.
func TestRollSnapshotDiskFull(t *testing.T) {
	t.Parallel()
	root := mountTmpfs(t, "4m")
	dir := filepath.Join(root, "topic-0")
	opts := smallSegments(64 << 10)
	image := make([]byte, 128<<10)
	opts.Snapshot = func(off int64) []byte { return image }
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var sent [][]byte
	i := 0
	var next []byte
	for {
		b := makeBatch(t, i, 1, 1000, int64(i))
		last := l.LogEndOffset() + int64(batch.Batch(b).LastOffsetDelta())
		if !l.active.Fits(len(b), last) {
			next = b
			break
		}
		if _, err := l.Append(b); err != nil {
			t.Fatal(err)
		}
		sent = append(sent, b)
		i++
	}
	l.waitIdle()
	leo := l.LogEndOffset()
	nsegs := len(*l.segs.Load())
	filler := rollSnapshotFill(t, root)
	before := rollSnapshotNames(t, dir)
	_, err = l.Append(next)
	if err == nil {
		t.Fatalf("append needing a roll on a full disk succeeded")
	}
	if !errors.Is(err, segment.ErrNoSpace) {
		t.Errorf("roll on a full disk: %v, want ErrNoSpace", err)
	}
	if got := len(*l.segs.Load()); got != nsegs || l.LogEndOffset() != leo {
		t.Errorf("failed roll changed the log: %d segments (was %d), end %d (was %d)", got, nsegs, l.LogEndOffset(), leo)
	}
	after := rollSnapshotNames(t, dir)
	if strings.Join(before, ",") != strings.Join(after, ",") {
		t.Errorf("failed roll changed the directory: %v -> %v", before, after)
	}
	if _, err := l.Append(next); !errors.Is(err, segment.ErrNoSpace) {
		t.Errorf("second append on a full disk: %v", err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	res, err := l.Append(next)
	if err != nil {
		t.Fatalf("append after space returned: %v", err)
	}
	if res.BaseOffset != leo {
		t.Fatalf("append after space returned at %d, want %d", res.BaseOffset, leo)
	}
	sent = append(sent, next)
	if _, err := os.Stat(filepath.Join(dir, segment.FileName(leo, ".snapshot"))); err != nil {
		t.Errorf("roll snapshot at %d: %v", leo, err)
	}
	got := readAll(t, l)
	if len(got) != len(sent) {
		t.Fatalf("%d batches readable, %d appended", len(got), len(sent))
	}
	if l.failed.Load() {
		t.Fatalf("log failed: %v", *l.failErr.Load())
	}
}

// TestPurgeRollSnapshotDiskFull: as above for a roll at the log
// start (after a purge), whose snapshot is written synced.
func TestPurgeRollSnapshotDiskFull(t *testing.T) {
	t.Parallel()
	root := mountTmpfs(t, "4m")
	dir := filepath.Join(root, "topic-0")
	opts := smallSegments(64 << 10)
	image := make([]byte, 128<<10)
	opts.Snapshot = func(off int64) []byte { return image }
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := range 10 {
		if _, err := l.Append(makeBatch(t, i, 1, 1000, int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	leo := l.LogEndOffset()
	if err := l.DeleteRecordsBefore(leo); err != nil {
		t.Fatal(err)
	}
	l.waitIdle()
	l.opts.RollAge = time.Millisecond // the next append rolls by age
	nsegs := len(*l.segs.Load())
	filler := rollSnapshotFill(t, root)
	before := rollSnapshotNames(t, dir)
	b := makeBatch(t, 99, 1, 1000, 1<<40)
	if _, err := l.Append(b); !errors.Is(err, segment.ErrNoSpace) {
		t.Fatalf("purge roll on a full disk: %v, want ErrNoSpace", err)
	}
	if got := len(*l.segs.Load()); got != nsegs || l.LogEndOffset() != leo {
		t.Fatalf("failed roll changed the log: %d segments (was %d), end %d (was %d)", got, nsegs, l.LogEndOffset(), leo)
	}
	if after := rollSnapshotNames(t, dir); strings.Join(before, ",") != strings.Join(after, ",") {
		t.Fatalf("failed roll changed the directory: %v -> %v", before, after)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if res, err := l.Append(b); err != nil || res.BaseOffset != leo {
		t.Fatalf("append after space returned: %+v %v", res, err)
	}
	if _, err := os.Stat(filepath.Join(dir, segment.FileName(leo, ".snapshot"))); err != nil {
		t.Fatalf("roll snapshot at %d: %v", leo, err)
	}
}

// TestStraySnapshotsManyRolls: after many rolls every segment base
// but the first has its snapshot, a Close snapshot at a non-base is the
// newest until the next roll removes it, and a .tmp left by a crash in
// the middle of a snapshot write goes at Open.
func TestStraySnapshotsManyRolls(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := smallSegments(4096)
	opts.Snapshot = func(off int64) []byte { return []byte{byte(off)} }
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	appendN := func(l *Log, n int) {
		for range n {
			if _, err := l.Append(makeBatch(t, i, 1, 300, int64(i))); err != nil {
				t.Fatal(err)
			}
			i++
		}
	}
	check := func(l *Log, extra int64) {
		t.Helper()
		want := map[int64]bool{}
		for _, b := range l.SegmentBases()[1:] {
			want[b] = true
		}
		if extra >= 0 {
			want[extra] = true
		}
		got := snapshotFiles(t, dir)
		gotm := map[int64]bool{}
		for _, s := range got {
			gotm[s] = true
		}
		for w := range want {
			if !gotm[w] {
				t.Fatalf("snapshot at %d missing: have %v, segments %v", w, got, l.SegmentBases())
			}
		}
		for g := range gotm {
			if !want[g] {
				t.Fatalf("stray snapshot at %d: have %v, segments %v", g, got, l.SegmentBases())
			}
		}
	}
	appendN(l, 300)
	l.waitIdle()
	if len(l.SegmentBases()) < 20 {
		t.Fatalf("setup: %d segments", len(l.SegmentBases()))
	}
	check(l, -1)
	leo := l.LogEndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, segment.FileName(leo+5, ".snapshot")+".tmp"), []byte{1, 2}, 0o644); err != nil {
		t.Fatal(err)
	}
	l, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range rollSnapshotNames(t, dir) {
		if strings.HasSuffix(n, ".tmp") && !strings.HasPrefix(n, "spare-") {
			t.Fatalf("left after Open: %s", n)
		}
	}
	check(l, leo)
	appendN(l, 100)
	l.waitIdle()
	check(l, -1)
	l.Kill()
	l, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	check(l, -1)
}
