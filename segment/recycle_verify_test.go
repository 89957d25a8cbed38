package segment

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/idemlog/idemlog/batch"
)

// randBatch is one record of size random bytes.
func randBatch(t *testing.T, r *rand.ChaCha8, size int) batch.Batch {
	t.Helper()
	b := batch.NewBuilder(batch.CodecNone)
	v := make([]byte, size)
	r.Read(v)
	b.Append(1, nil, v, nil)
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return batch.Batch(append([]byte(nil), out...))
}

// TestVerifyStaleTailRandomValues: old batches of incompressible values,
// new data ending inside one. The search for the next old header must
// not give up on the random bytes before it (it once counted 64 tries on
// anything with a plausible length, and called the tail corruption).
func TestVerifyStaleTailRandomValues(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := rand.NewChaCha8([32]byte{1})
	opts := Options{MaxBytes: 16 << 20, IndexMaxBytes: 4096, IndexIntervalBytes: 64 << 10, ReserveAhead: 64 << 10}
	const value = 512 << 10
	rf, _ := recycledFile(t, dir, opts, func() batch.Batch { return randBatch(t, r, value) })
	s := activate(t, dir, opts, rf, 1000)
	for i := range 3 {
		if _, err := s.Append(testBatch(t, 9, 1, value+3000), 1000+int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	rep, err := VerifyFile(filepath.Join(dir, FileName(1000, ".log")), 0)
	if err != nil || rep.Batches != 3 || rep.StaleTail == 0 {
		t.Fatalf("legit stale tail after random old values: %+v, %v", rep, err)
	}
}

// TestVerifyCorruptBatchBeforeStaleTail: a corrupt batch of the
// segment's own in the middle of an unclean active segment, valid ones
// after it, then the stale tail: an error, not a tail that would hide
// the valid batches (with the index lost to a power loss, nothing else
// would catch it).
func TestVerifyCorruptBatchBeforeStaleTail(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const base, n = 1000, 5
	s, _ := recycledSegment(t, dir, base, n)
	size := s.Size()
	s.Close()
	path := filepath.Join(dir, FileName(base, ".log"))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	per := size / n
	if _, err := f.WriteAt([]byte{0xee}, 2*per+1000); err != nil { // body of batch 2
		t.Fatal(err)
	}
	f.Close()
	rep, err := VerifyFile(path, 0)
	t.Logf("with index: %+v, %v", rep, err)
	// Power loss: the unsynced index kept none of its entries.
	os.Truncate(filepath.Join(dir, FileName(base, ".index")), 0)
	rep, err = VerifyFile(path, 0)
	if err == nil {
		t.Fatalf("corrupt batch 2 of 5 accepted: %+v (batches 3, 4 hidden in a 'stale tail')", rep)
	}
}
