package segment

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/internal/testutil"
)

func testBatch(t testing.TB, id, n, size int) batch.Batch {
	t.Helper()
	return testutil.Batch(t, testutil.BatchSpec{Records: n, Timestamp: int64(1000 + id), Value: func(i int) []byte {
		v := bytes.Repeat([]byte{byte(id)}, size)
		copy(v, fmt.Sprint(id, "/", i))
		return v
	}})
}

var testOpts = Options{MaxBytes: 64 << 10, IndexMaxBytes: 1024, IndexIntervalBytes: 300, ReserveAhead: 8 << 10}

// fill appends batches until the segment is full and returns them with
// their base offsets.
func fill(t *testing.T, s *Segment, first int64) (sent []batch.Batch, bases []int64) {
	t.Helper()
	off := first
	for i := 0; ; i++ {
		b := testBatch(t, i, 1+i%3, 200)
		if !s.Fits(len(b), off+int64(b.LastOffsetDelta())) {
			return sent, bases
		}
		if _, err := s.Append(b, off); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		s.Publish(s.Size())
		sent, bases = append(sent, b), append(bases, off)
		off += int64(b.RecordsCount())
	}
}

func TestAppendModesAndLookup(t *testing.T) {
	t.Parallel()
	for _, mode := range []WriteMode{WriteMmap, WritePwrite} {
		t.Run(fmt.Sprint(mode), func(t *testing.T) {
			opts := testOpts
			opts.Mode = mode
			s, err := Create(t.TempDir(), 100, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			sent, bases := fill(t, s, 100)
			if s.offsets.Entries() == 0 {
				t.Fatal("no index entries written")
			}
			for i, b := range sent {
				if !bytes.Equal(b[:8], make([]byte, 8)) {
					t.Fatal("Append modified the caller's batch")
				}
				for _, target := range []int64{bases[i], bases[i] + int64(b.LastOffsetDelta())} {
					pos, ok := s.Lookup(target)
					if !ok {
						t.Fatalf("Lookup(%d) found nothing", target)
					}
					got := batch.Batch(s.Read(pos, s.Published()))
					n, _ := batch.Size(got)
					got = got[:n]
					if got.BaseOffset() != bases[i] || !bytes.Equal(got[8:], b[8:]) {
						t.Fatalf("Lookup(%d): batch at %d has base %d", target, pos, got.BaseOffset())
					}
				}
			}
			if _, ok := s.Lookup(s.NextOffset()); ok {
				t.Fatal("Lookup past the end found a batch")
			}
		})
	}
}

func TestAppendRejects(t *testing.T) {
	t.Parallel()
	s, err := Create(t.TempDir(), 0, testOpts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := testBatch(t, 1, 1, 100)
	if _, err := s.Append(b, 0); err != nil {
		t.Fatal(err)
	}
	size := s.Size()
	if _, err := s.Append(b, 0); !errors.Is(err, ErrFull) {
		t.Fatalf("offset going backwards: %v", err)
	}
	if _, err := s.Append(b, 1<<31); !errors.Is(err, ErrOffsetGap) {
		t.Fatalf("offset gap: %v", err)
	}
	// An empty segment takes any first offset, but not one past int32 of
	// its base (relative offsets in the index).
	empty, err := Create(t.TempDir(), 0, testOpts)
	if err != nil {
		t.Fatal(err)
	}
	defer empty.Close()
	if _, err := empty.Append(b, 1<<31); !errors.Is(err, ErrFull) {
		t.Fatalf("relative offset overflow: %v", err)
	}
	if _, err := s.Append(testBatch(t, 2, 1, 70<<10), 1); !errors.Is(err, ErrFull) {
		t.Fatalf("batch over capacity: %v", err)
	}
	if s.Size() != size || s.NextOffset() != 1 {
		t.Fatal("rejected appends changed the segment")
	}
}

func TestSealReopenLoadTail(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Create(dir, 0, testOpts)
	if err != nil {
		t.Fatal(err)
	}
	sent, bases := fill(t, s, 0)
	next, size := s.NextOffset(), s.Size()
	maxTs, maxOff := s.MaxTimestamp()
	if err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	st, _ := os.Stat(filepath.Join(dir, FileName(0, ".log")))
	if st.Size() != size {
		t.Fatalf("sealed file is %d bytes, data %d", st.Size(), size)
	}
	for _, active := range []bool{false, true} {
		s, err := Open(dir, 0, testOpts, active)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.LoadTail(); err != nil {
			t.Fatalf("LoadTail: %v", err)
		}
		ts, off := s.MaxTimestamp()
		if s.NextOffset() != next || s.Size() != size || ts != maxTs || off != maxOff {
			t.Fatalf("active=%v: next %d size %d max %d@%d; want %d %d %d@%d", active, s.NextOffset(), s.Size(), ts, off, next, size, maxTs, maxOff)
		}
		pos, ok := s.Lookup(bases[len(bases)-1])
		if !ok || batch.Batch(s.Read(pos, size)).BaseOffset() != bases[len(bases)-1] {
			t.Fatal("lookup after reopen")
		}
		_ = sent
		s.Close()
	}
}

func TestRecoverCutsAtCorruption(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Create(dir, 0, testOpts)
	if err != nil {
		t.Fatal(err)
	}
	sent, bases := fill(t, s, 0)
	// No Seal: the file keeps its reserved zero tail, as after a crash.
	var cut int64
	for _, b := range sent[:len(sent)/2] {
		cut += int64(len(b))
	}
	s.data[cut+30] ^= 0xff // inside the CRC-covered part of the next batch
	s.Close()
	s, err = Open(dir, 0, testOpts, true)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var visited int
	truncated, err := s.Recover(0, func(batch.Batch) { visited++ })
	if err != nil {
		t.Fatal(err)
	}
	if !truncated || s.Size() != cut || visited != len(sent)/2 || s.NextOffset() != bases[len(sent)/2] {
		t.Fatalf("truncated %v size %d visited %d next %d; want cut at %d after %d batches", truncated, s.Size(), visited, s.NextOffset(), cut, len(sent)/2)
	}
	st, _ := os.Stat(filepath.Join(dir, FileName(0, ".log")))
	if st.Size() != cut {
		t.Fatalf("file %d bytes after recovery, want %d", st.Size(), cut)
	}
	// Appends continue at the cut.
	if _, err := s.Append(sent[0], s.NextOffset()); err != nil {
		t.Fatalf("append after recovery: %v", err)
	}
	// A clean zero tail alone is not a truncation.
	dir2 := t.TempDir()
	s2, _ := Create(dir2, 0, testOpts)
	fill(t, s2, 0)
	s2.Close()
	s2, _ = Open(dir2, 0, testOpts, true)
	defer s2.Close()
	if truncated, err := s2.Recover(0, nil); err != nil || truncated {
		t.Fatalf("zero tail: truncated %v, %v", truncated, err)
	}
}

func TestSpareActivate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sp, err := CreateSpare(dir, testOpts, 0)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sp.Activate(500)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if tmp, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(tmp) != 0 {
		t.Fatalf("spare file still under its temporary name: %v", tmp)
	}
	sent, _ := fill(t, s, 500)
	if len(sent) == 0 || s.Base() != 500 {
		t.Fatal("activated spare took no appends")
	}
	if err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	r, err := VerifyFile(filepath.Join(dir, FileName(500, ".log")), 0)
	if err != nil || r.Batches != int64(len(sent)) || r.IndexEntries <= 0 {
		t.Fatalf("verify of an activated spare: %+v, %v", r, err)
	}
}

func TestVerifyFindsCorruption(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, _ := Create(dir, 0, testOpts)
	sent, _ := fill(t, s, 0)
	s.Seal()
	s.Close()
	path := filepath.Join(dir, FileName(0, ".log"))
	r, err := VerifyFile(path, 0)
	if err != nil || r.Batches != int64(len(sent)) || r.Gaps != 0 || r.ZeroTail != 0 {
		t.Fatalf("clean verify: %+v, %v", r, err)
	}
	data, _ := os.ReadFile(path)
	pos := len(sent[0]) + len(sent[1])
	data[pos+40] ^= 1
	os.WriteFile(path, data, 0o644)
	_, err = VerifyFile(path, 0)
	if !errors.Is(err, batch.ErrCRC) || !bytes.Contains([]byte(err.Error()), []byte(fmt.Sprintf("position %d", pos))) {
		t.Fatalf("flipped byte: %v", err)
	}
	data[pos+40] ^= 1
	os.WriteFile(path, data, 0o644)
	idx, _ := os.ReadFile(filepath.Join(dir, FileName(0, ".index")))
	idx[7]++ // first entry's position no longer a batch start
	os.WriteFile(filepath.Join(dir, FileName(0, ".index")), idx, 0o644)
	if _, err := VerifyFile(path, 0); !errors.Is(err, ErrVerify) {
		t.Fatalf("bad index entry: %v", err)
	}
}

// TestAppendRefusesGap: after the first batch, an append must start at the
// next offset: Recover reads a gap as the end of the data, so a segment
// that took one would lose the batches after it in a crash.
func TestAppendRefusesGap(t *testing.T) {
	t.Parallel()
	s, err := Create(t.TempDir(), 0, testOpts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Append(testBatch(t, 1, 2, 10), 0); err != nil {
		t.Fatal(err)
	}
	size := s.Size()
	if _, err := s.Append(testBatch(t, 2, 1, 10), 5); !errors.Is(err, ErrOffsetGap) {
		t.Fatalf("append at 5 after offsets 0..1: %v, want ErrOffsetGap", err)
	}
	if s.Size() != size || s.NextOffset() != 2 {
		t.Fatalf("refused append changed the segment: size %d, next %d", s.Size(), s.NextOffset())
	}
	if _, err := s.Append(testBatch(t, 3, 1, 10), 2); err != nil {
		t.Fatalf("append at the next offset: %v", err)
	}
}

// A segment opened sealed holds no descriptor for its .log (its mapping
// holds the bytes), and what needs the file again reopens it: Recover
// truncates a torn tail, Activate makes it writable.
func TestSealedSegmentHoldsNoLogDescriptor(t *testing.T) {
	dir := t.TempDir()
	s, err := Create(dir, 0, Options{MaxBytes: 1 << 20, IndexIntervalBytes: 64})
	if err != nil {
		t.Fatal(err)
	}
	var off int64
	for i := range 20 {
		b := testBatch(t, i, 1, 100)
		if _, err := s.Append(b, off); err != nil {
			t.Fatal(err)
		}
		off++
	}
	if err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range ents {
			if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && target == filepath.Join(dir, FileName(0, ".log")) {
				n++
			}
		}
		return n
	}
	s, err = Open(dir, 0, Options{MaxBytes: 1 << 20, IndexIntervalBytes: 64}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n := fds(); n != 0 {
		t.Fatalf("a sealed segment holds %d descriptors of its .log", n)
	}
	if err := s.LoadTail(); err != nil || s.NextOffset() != 20 {
		t.Fatalf("LoadTail: %v, next %d", err, s.NextOffset())
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recover(1<<20, nil); err != nil || s.NextOffset() != 20 {
		t.Fatalf("Recover: %v, next %d", err, s.NextOffset())
	}
	if err := s.Activate(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(testBatch(t, 20, 1, 100), 20); err != nil {
		t.Fatalf("append after Activate: %v", err)
	}
	if n := fds(); n != 1 {
		t.Fatalf("an active segment holds %d descriptors of its .log, want 1", n)
	}
}
