package logdump

import (
	"bytes"
	"errors"
	"testing"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/segment"
)

// recycledLog writes, with package segment, what a crash leaves of a log
// that recycles: a file recycled from an old segment at base 0 became the
// segment at 100 and rolled after three batches, unsealed (its old
// batches follow), and the segment at next holds two more. No
// clean-shutdown marker.
func recycledLog(t *testing.T, next int64) string {
	t.Helper()
	dir := t.TempDir()
	// Large batches: a file of small ones is not recycled.
	opts := segment.Options{MaxBytes: 1 << 20, IndexIntervalBytes: 1 << 20}
	value := bytes.Repeat([]byte("v"), 80<<10)
	one := func() batch.Batch {
		b := batch.NewBuilder(batch.CodecNone)
		b.Append(1, nil, value, nil)
		out, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		return batch.Batch(bytes.Clone(out))
	}
	appendN := func(s *segment.Segment, from int64, n int) {
		for i := range n {
			if _, err := s.Append(one(), from+int64(i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	old, err := segment.Create(dir, 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	appendN(old, 0, 12)
	if err := old.Seal(); err != nil {
		t.Fatal(err)
	}
	rf, err := old.Recycle()
	if err != nil || rf == nil {
		t.Fatalf("Recycle: %v, %v", rf, err)
	}
	sp, err := segment.OpenSpare(dir, opts, rf)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := sp.Activate(100)
	if err != nil {
		t.Fatal(err)
	}
	appendN(rec, 100, 3)
	rec.Close()
	last, err := segment.Create(dir, next, opts)
	if err != nil {
		t.Fatal(err)
	}
	appendN(last, next, 2)
	last.Close()
	return dir
}

// TestVerifyRecycledTail: a rolled segment with a stale tail passes when
// its batches reach the next base (a note says what the tail is), and
// fails when they fall short of it, since then the tail may be data lost
// in a torn write.
func TestVerifyRecycledTail(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	sum, err := Verify(&out, recycledLog(t, 103), VerifyOptions{})
	if err != nil || sum.Batches != 5 || sum.Notes == 0 || !bytes.Contains(out.Bytes(), []byte("older segment")) {
		t.Fatalf("verify: %+v, %v\n%s", sum, err, out.String())
	}
	out.Reset()
	if _, err := Verify(&out, recycledLog(t, 104), VerifyOptions{}); !errors.Is(err, segment.ErrVerify) {
		t.Fatalf("verify with a short rolled segment: %v, want ErrVerify\n%s", err, out.String())
	}
}
