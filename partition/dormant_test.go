package partition

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/idemlog/idemlog/segment"
)

func countFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// dirState is every file's name, size and modification time.
func dirState(t *testing.T, dir string) map[string]string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = fmt.Sprint(fi.ModTime(), " ", fi.Size())
	}
	return out
}

// fillAndClose appends n batches of 10 records (segments of 4 KiB, so
// several) to a new log in dir and closes it cleanly.
func fillAndClose(t *testing.T, dir string, n int, ts int64) Options {
	t.Helper()
	opts := smallSegments(4096)
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := l.Append(makeBatch(t, i, 10, 20, ts)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return opts
}

// A log closed cleanly opens dormant under Lazy: offsets in place, no
// descriptor, no goroutine, nothing on disk changed by an Open and Close
// that touch nothing.
func TestLazyOpenHoldsNothingAndChangesNothing(t *testing.T) {
	dir := t.TempDir()
	opts := fillAndClose(t, dir, 50, time.Now().UnixMilli())
	opts.Lazy = true
	before := dirState(t, dir)
	fds, gs := countFDs(t), runtime.NumGoroutine()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !l.Dormant() {
		t.Fatal("a cleanly closed log opened eagerly under Lazy")
	}
	if got := countFDs(t) - fds; got != 0 {
		t.Errorf("a dormant log holds %d descriptors", got)
	}
	if got := runtime.NumGoroutine() - gs; got != 0 {
		t.Errorf("a dormant log runs %d goroutines", got)
	}
	if l.LogEndOffset() != 500 || l.HighWatermark() != 500 || l.LogStartOffset() != 0 || l.RecoveredFrom() != 500 {
		t.Errorf("dormant offsets: end %d hw %d start %d recovered from %d; want 500 500 0 500",
			l.LogEndOffset(), l.HighWatermark(), l.LogStartOffset(), l.RecoveredFrom())
	}
	if bases := l.SegmentBases(); len(bases) < 2 || bases[0] != 0 || l.FirstRetainedOffset() != 0 {
		t.Errorf("dormant segment bases %v, first retained %d", bases, l.FirstRetainedOffset())
	}
	// A fetch at the log end, a flush and a retention pass with nothing
	// to delete answer without the files.
	if c, err := l.Read(500, 1<<20); err != nil || len(c.Data) != 0 {
		t.Fatalf("Read at the end: %d bytes, %v", len(c.Data), err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if n, err := l.ApplyRetention(); err != nil || n != 0 {
		t.Fatalf("ApplyRetention: %d, %v", n, err)
	}
	if !l.Dormant() {
		t.Fatal("a fetch at the end, a flush or a retention pass with nothing due opened the segments")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	after := dirState(t, dir)
	if len(after) != len(before) {
		t.Fatalf("files before %v, after %v", before, after)
	}
	for name, st := range before {
		if after[name] != st {
			t.Errorf("%s changed: %q -> %q", name, st, after[name])
		}
	}
}

// The first read below the high watermark opens the segments and serves
// the batches that were there; a Close then writes a new marker, and the
// next lazy Open is dormant again with the same offsets.
func TestLazyReadWakesTheLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := fillAndClose(t, dir, 50, time.Now().UnixMilli())
	opts.Lazy = true
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	got := readAll(t, l)
	if l.Dormant() {
		t.Fatal("still dormant after a read")
	}
	if len(got) != 50 || got[49].LastOffset() != 499 {
		t.Fatalf("read %d batches", len(got))
	}
	if off, err := l.OffsetForTime(0); err != nil || off != 0 {
		t.Fatalf("OffsetForTime(0) = %d, %v", off, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if !l.Dormant() || l.LogEndOffset() != 500 {
		t.Fatalf("reopened: dormant %v, end %d", l.Dormant(), l.LogEndOffset())
	}
}

// An append to a dormant log removes the marker before it writes, so a
// crash afterwards is recovered as a crash: the next Open scans and keeps
// what was appended.
func TestLazyAppendRemovesMarkerFirst(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := fillAndClose(t, dir, 5, time.Now().UnixMilli())
	opts.Lazy = true
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	res, err := l.Append(makeBatch(t, 9, 10, 20, time.Now().UnixMilli()))
	if err != nil {
		t.Fatal(err)
	}
	if res.BaseOffset != 50 {
		t.Fatalf("appended at %d, want 50", res.BaseOffset)
	}
	if _, err := os.Stat(filepath.Join(dir, cleanShutdownFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("clean-shutdown marker still there after an append: %v", err)
	}
	l.Kill()
	l, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Dormant() {
		t.Fatal("a log killed after an append opened dormant")
	}
	if l.LogEndOffset() != 60 || len(readAll(t, l)) != 6 {
		t.Fatalf("after the crash: end %d", l.LogEndOffset())
	}
}

// A directory with no segment (a new partition) opens dormant, empty at
// its log start; the first append creates the first segment there.
func TestLazyFreshDirCreatesSegmentOnFirstAppend(t *testing.T) {
	t.Parallel()
	for _, start := range []int64{0, 40} {
		dir := t.TempDir()
		if start > 0 {
			if err := writeCheckpoint(filepath.Join(dir, logStartFile), dir, start); err != nil {
				t.Fatal(err)
			}
		}
		opts := smallSegments(4096)
		opts.Lazy = true
		l, err := Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		if !l.Dormant() || l.LogEndOffset() != start || l.LogStartOffset() != start || l.FirstRetainedOffset() != start {
			t.Fatalf("dormant %v, end %d, start %d", l.Dormant(), l.LogEndOffset(), l.LogStartOffset())
		}
		if ents, _ := os.ReadDir(dir); (start == 0 && len(ents) != 0) || (start > 0 && len(ents) != 1) {
			t.Fatalf("a dormant open wrote files: %v", ents)
		}
		if res, err := l.Append(makeBatch(t, 1, 10, 20, 1)); err != nil || res.BaseOffset != start {
			t.Fatalf("append: %+v, %v", res, err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, segment.FileName(start, ".log"))); err != nil {
			t.Fatal(err)
		}
		// A snapshot or any segment file makes the open eager.
		l, err = Open(dir, Options{})
		if err != nil || l.LogEndOffset() != start+10 {
			t.Fatalf("reopened eagerly: %v", err)
		}
		_ = l.Close()
	}
}

// A marker that is damaged, or empty as Kafka's is, makes the log open
// eagerly, trusting only the marker's presence (no scan).
func TestLazyDamagedMarkerOpensEagerly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := fillAndClose(t, dir, 5, 1)
	opts.Lazy = true
	path := filepath.Join(dir, cleanShutdownFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, content := range [][]byte{append([]byte{data[0] ^ 1}, data[1:]...), nil} {
		if err := os.WriteFile(path, content, 0o644); err != nil {
			t.Fatal(err)
		}
		l, err := Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		if l.Dormant() {
			t.Errorf("case %d: opened dormant on a marker without a valid state", i)
		}
		if l.LogEndOffset() != 50 {
			t.Errorf("case %d: end %d, want 50", i, l.LogEndOffset())
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// Segments that no longer end where the marker says (changed behind the
// log's back) fail the log at its first use instead of being appended
// to at the wrong offset.
func TestLazyMarkerDisagreeingWithSegmentsFailsTheLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := fillAndClose(t, dir, 5, 1)
	opts.Lazy = true
	path := filepath.Join(dir, cleanShutdownFile)
	st, ok, err := readCleanShutdown(dir)
	if err != nil || !ok {
		t.Fatalf("marker: %v %v", ok, err)
	}
	st.LogEndOffset = 70
	if err := os.WriteFile(path, st.encode(), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !l.Dormant() {
		t.Fatal("not dormant")
	}
	if _, err := l.Append(makeBatch(t, 1, 1, 1, 1)); !errors.Is(err, ErrFailed) {
		t.Fatalf("append: %v, want ErrFailed", err)
	}
	if err := l.Close(); !errors.Is(err, ErrFailed) {
		t.Fatalf("Close: %v, want ErrFailed", err)
	}
	l, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.LogEndOffset() != 50 {
		t.Fatalf("reopened at %d, want 50", l.LogEndOffset())
	}
}

// Retention over a dormant log opens it only when something is due: by
// size here.
func TestLazyRetentionWakesOnlyWhenDue(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := fillAndClose(t, dir, 50, time.Now().UnixMilli())
	opts.Lazy = true
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := l.ApplyRetention(); err != nil || n != 0 || !l.Dormant() {
		t.Fatalf("nothing due: %d, %v, dormant %v", n, err, l.Dormant())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	opts.RetentionBytes = 4096
	l, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	n, err := l.ApplyRetention()
	if err != nil || n == 0 {
		t.Fatalf("by size: deleted %d, %v", n, err)
	}
	if l.LogStartOffset() == 0 {
		t.Fatal("the log start did not move")
	}
}

// OpenEmpty, which reads nothing, makes of a new directory what a lazy
// Open of it makes (TestLazyFreshDirCreatesSegmentOnFirstAppend): a
// dormant log empty at 0 whose first append creates the first segment and
// whose clean close lets the next Open find it whole.
func TestOpenEmptyIsALazyOpenOfANewDir(t *testing.T) {
	dir := t.TempDir()
	opts := smallSegments(4096)
	l, err := OpenEmpty(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := Open(t.TempDir(), Options{Lazy: true})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if l.Dormant() != fresh.Dormant() || l.LogEndOffset() != fresh.LogEndOffset() || l.LogStartOffset() != fresh.LogStartOffset() ||
		l.FirstRetainedOffset() != fresh.FirstRetainedOffset() || l.HighWatermark() != fresh.HighWatermark() || l.RecoveryPoint() != fresh.RecoveryPoint() {
		t.Fatalf("OpenEmpty: dormant %v end %d start %d hw %d; a lazy Open: dormant %v end %d start %d hw %d", l.Dormant(), l.LogEndOffset(), l.LogStartOffset(), l.HighWatermark(),
			fresh.Dormant(), fresh.LogEndOffset(), fresh.LogStartOffset(), fresh.HighWatermark())
	}
	for i := range 30 {
		if res, err := l.Append(makeBatch(t, i, 10, 20, 1)); err != nil || res.BaseOffset != int64(10*i) {
			t.Fatalf("append %d: %+v, %v", i, res, err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	opts.Lazy = true
	l, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if !l.Dormant() || l.LogEndOffset() != 300 {
		t.Fatalf("reopened: dormant %v, end %d, want dormant at 300", l.Dormant(), l.LogEndOffset())
	}
}
