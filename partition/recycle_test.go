//go:build linux

package partition

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/idemlog/idemlog/segment"
)

// recycleOptions: SyncAlways (which zero-fills, and so recycles), 1 MiB
// segments, retention by size, equal-sized batches of 80 KB
// (recycleBatch), large enough for their files to be recycled
// (segment.Recycle), and lined up with the new ones in a recycled file.
func recycleOptions() Options {
	o := smallSegments(1 << 20)
	o.Segment.IndexIntervalBytes = 64 << 10
	o.Segment.ReserveAhead = 64 << 10
	o.Sync = SyncPolicy{Kind: SyncAlways}
	o.RetentionAge = -1
	o.RetentionBytes = 2 << 20
	return o
}

func recycleBatch(t testing.TB, id int) []byte { return makeBatch(t, id, 1, 80<<10, 1) }

// born is when a file was created (statx's birth time): a recycled
// segment file is older than its name.
func born(t *testing.T, path string) time.Time {
	t.Helper()
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, 0, unix.STATX_BTIME, &st); err != nil {
		t.Fatal(err)
	}
	if st.Mask&unix.STATX_BTIME == 0 {
		t.Skip("no birth times on this filesystem")
	}
	return time.Unix(st.Btime.Sec, int64(st.Btime.Nsec))
}

// appendUntilRolls appends recycleBatch batches (ids from *id on) until
// the log has rolled n more times.
func appendUntilRolls(t *testing.T, l *Log, id *int, n int) {
	t.Helper()
	want := len(*l.segs.Load()) + n
	for len(*l.segs.Load()) < want {
		if _, err := l.Append(recycleBatch(t, *id)); err != nil {
			t.Fatal(err)
		}
		*id++
	}
}

// openRolled opens a log in a new directory and appends until it has
// rolled five times and its maintainer has made the next spare (a new
// file): retention then has segments to delete.
func openRolled(t *testing.T, opts Options) (l *Log, dir string, id int) {
	t.Helper()
	dir = t.TempDir()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	appendUntilRolls(t, l, &id, 5)
	l.waitIdle()
	return l, dir, id
}

// checkDense reads the whole log and checks every batch from the log
// start is the one appended with its offset as id.
func checkDense(t *testing.T, l *Log) {
	t.Helper()
	next := l.LogStartOffset()
	for _, b := range readAll(t, l) {
		if b.BaseOffset() != next {
			t.Fatalf("batch at %d, want %d", b.BaseOffset(), next)
		}
		sameBatch(t, b, recycleBatch(t, int(next)), next)
		next = b.NextOffset()
	}
	if next != l.LogEndOffset() {
		t.Fatalf("batches end at %d, log end %d", next, l.LogEndOffset())
	}
}

// TestRecycleReusesRetiredFile: a segment file that retention deletes
// comes back as a later segment's file (same inode), the data read back
// is exactly what was appended, and NoRecycle turns it off.
func TestRecycleReusesRetiredFile(t *testing.T) {
	t.Parallel()
	if !segment.ZeroFillSupported {
		t.Skip("recycling follows zero fills, Linux only")
	}
	for _, off := range []bool{false, true} {
		opts := recycleOptions()
		opts.NoRecycle = off
		l, dir, id := openRolled(t, opts)
		births := map[time.Time]int64{}
		for _, s := range *l.segs.Load() {
			births[born(t, filepath.Join(dir, segment.FileName(s.Base(), ".log")))] = s.Base()
		}
		if _, err := l.ApplyRetention(); err != nil {
			t.Fatal(err)
		}
		start := l.LogStartOffset()
		// The maintainer swaps the pending new spare for the recycled
		// file at its next task, so the next roll may already take it.
		appendUntilRolls(t, l, &id, 3)
		l.waitIdle()
		// A live segment whose file was born with a retired one is that
		// file (birth times are exact to the nanosecond on ext4).
		reused := 0
		for _, s := range *l.segs.Load() {
			if old, ok := births[born(t, filepath.Join(dir, segment.FileName(s.Base(), ".log")))]; ok && old < start && old != s.Base() {
				reused++
			}
		}
		if off {
			if reused != 0 || l.Recycled() != 0 {
				t.Fatalf("NoRecycle: %d files reused, Recycled %d", reused, l.Recycled())
			}
		} else if reused == 0 || l.Recycled() == 0 {
			t.Fatalf("no retired file reused (Recycled %d)", l.Recycled())
		}
		checkDense(t, l)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if spares, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(spares) != 0 {
			t.Fatalf("files left after close: %v", spares)
		}
		verifyDir(t, dir)
		l2, err := Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		checkDense(t, l2)
		l2.Close()
	}
}

// TestRecycledRolledSegmentCrash: the process dies after a recycled
// segment rolled but before the maintainer sealed (trimmed) it, so its
// file runs on past its data with the old segment's batches. Everything
// acknowledged must come back, and the segments after it must stay: with
// the recovery point below the segment (it is scanned) and past it
// (LoadTail would read the file to its end).
func TestRecycledRolledSegmentCrash(t *testing.T) {
	t.Parallel()
	if !segment.ZeroFillSupported {
		t.Skip("recycling follows zero fills, Linux only")
	}
	for _, checkpointed := range []bool{false, true} {
		opts := recycleOptions()
		l, dir, id := openRolled(t, opts)
		if _, err := l.ApplyRetention(); err != nil {
			t.Fatal(err)
		}
		// The maintainer swaps that spare for the recycled file at its
		// next task, or makes it the spare after the next roll.
		for rolls := 0; !l.ActiveRecycled(); rolls++ {
			if rolls == 3 {
				t.Fatal("no roll took the recycled file")
			}
			appendUntilRolls(t, l, &id, 1)
			l.waitIdle()
		}
		rec := l.active
		// A few batches into it, then roll it with the maintainer
		// stopped: no seal, no trim.
		for range 3 {
			if _, err := l.Append(recycleBatch(t, id)); err != nil {
				t.Fatal(err)
			}
			id++
		}
		l.maint.drop.Store(true)
		// Rolled early (as segment.ms does), so most of the old file
		// lies past the data.
		l.mu.Lock()
		err := l.roll(l.leo)
		l.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if _, err := l.Append(recycleBatch(t, id)); err != nil {
				t.Fatal(err)
			}
			id++
		}
		recPath := filepath.Join(dir, segment.FileName(rec.Base(), ".log"))
		if st, _ := os.Stat(recPath); st.Size() < rec.Size()+256<<10 {
			t.Fatalf("rolled recycled segment has no stale tail: file %d, data %d", st.Size(), rec.Size())
		}
		if r, err := segment.VerifyFile(recPath, 0); err != nil || r.StaleTail == 0 || r.NextOffset != l.active.Base() {
			t.Fatalf("verify the rolled recycled segment: %+v, %v; want a stale tail after batches up to %d", r, err, l.active.Base())
		}
		if checkpointed {
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			if l.RecoveryPoint() <= rec.NextOffset() {
				t.Fatalf("recovery point %d not past the segment", l.RecoveryPoint())
			}
		}
		end := l.LogEndOffset()
		l.Kill()
		l2, err := Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		if l2.LogEndOffset() != end {
			t.Fatalf("checkpointed %v: log end %d after the crash, want %d", checkpointed, l2.LogEndOffset(), end)
		}
		checkDense(t, l2)
		if st, _ := os.Stat(recPath); st.Size() != rec.Size() {
			t.Fatalf("checkpointed %v: stale tail not cut: file %d, data %d", checkpointed, st.Size(), rec.Size())
		}
		l2.Close()
		verifyDir(t, dir)
	}
}

// TestSpareStaysRecycled: whichever of the maintainer's two paths takes
// the pooled file, the next roll gets it. (Without this: a roll took the
// pending new spare, the maintainer's preferRecycled then made the pooled
// file the spare, and the roll's taskSpare, finding the pool empty,
// replaced it with a new file.)
func TestSpareStaysRecycled(t *testing.T) {
	t.Parallel()
	if !segment.ZeroFillSupported {
		t.Skip("recycling follows zero fills, Linux only")
	}
	for _, pendingNew := range []bool{false, true} {
		l, _, _ := openRolled(t, recycleOptions())
		if _, err := l.ApplyRetention(); err != nil {
			t.Fatal(err)
		}
		l.waitIdle() // the maintainer retires the files
		if !l.recycle.pooled.Load() {
			t.Fatal("retention pooled nothing")
		}
		l.mu.Lock()
		if !pendingNew {
			// A roll took the pending spare and asked for the next.
			if sp := l.maint.spare.Swap(nil); sp != nil {
				sp.Discard()
			}
			l.maint.spareWanted.Store(true)
		}
		l.mu.Unlock()
		// The end of a prefault task: with a new file pending it swaps
		// in the pooled one; with none it leaves it to taskSpare.
		l.preferRecycled()
		if sp := l.maint.spare.Load(); pendingNew && (sp == nil || !sp.Recycled()) {
			t.Fatal("preferRecycled left a new file pending with a file pooled")
		}
		l.mu.Lock()
		l.submit(task{kind: taskSpare})
		l.mu.Unlock()
		l.waitIdle()
		if sp := l.maint.spare.Load(); sp == nil || !sp.Recycled() {
			t.Fatalf("pending new %v: the spare is not the recycled file (%v)", pendingNew, sp)
		}
		l.Close()
	}
}
