package segment

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/idemlog/idemlog/batch"
)

// TestVerifyFileGrowingSegment: verify of a live partition. The
// active segment's file grows by reservation (fallocate) as the writer
// goes; VerifyFile maps the file at its size of the moment, and a batch
// the writer appends across that size shows up cut at the end of the
// mapping. VerifyFile reports the healthy segment as holding a truncated
// batch (batch.ErrTruncated) instead of stopping at the mapped end as the
// zero tail it still was, or reporting ErrIO as it does for a file that
// changed under it by truncation.
func TestVerifyFileGrowingSegment(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := Options{MaxBytes: 1 << 20, ReserveAhead: 4096, IndexIntervalBytes: 1 << 20,
		Mode: WritePwrite, Reserve: ReserveFallocate}
	s, err := Create(dir, 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	one := func() batch.Batch {
		b := batch.NewBuilder(batch.CodecNone)
		b.Append(1, nil, bytes.Repeat([]byte("v"), 900), nil)
		out, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		return batch.Batch(bytes.Clone(out))
	}
	next := int64(0)
	appendOne := func() {
		if _, err := s.Append(one(), next); err != nil {
			t.Fatal(err)
		}
		next++
	}
	for range 3 {
		appendOne()
	}
	path := filepath.Join(dir, FileName(0, ".log"))
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	mapped := st.Size()
	grow := func(string) {
		// The writer goes on while verify reads: past the mapped size.
		for s.Size() <= mapped {
			appendOne()
		}
	}
	r, err := verifyFile(path, 0, "", grow)
	if err != nil && !errors.Is(err, ErrIO) {
		t.Fatalf("VerifyFile of a live segment grown from %d to %d bytes while read: %v (report %+v), want success or ErrIO",
			mapped, s.Size(), err, r)
	}
}
