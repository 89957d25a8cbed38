package segment

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/idemlog/idemlog/index"
)

// A segment truncated while VerifyFile reads it (a live partition sealing
// or retiring it) fails the verify with ErrIO instead of killing the
// process with SIGBUS on the mapped pages past the new end.
func TestVerifyFileTruncatedWhileRead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Create(dir, 0, testOpts)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, s, 0)
	s.Seal()
	s.Close()
	path := filepath.Join(dir, FileName(0, ".log"))
	truncate := func(p string) {
		if err := os.Truncate(p, 0); err != nil {
			t.Error(err)
		}
	}
	_, err = verifyFile(path, 0, "", truncate)
	if !errors.Is(err, ErrIO) {
		t.Fatalf("VerifyFile of a file truncated under it: %v, want ErrIO", err)
	}
}

// LoadTail, like Recover, trusts a segment only if its first batch starts
// at the segment's base offset: otherwise the partition recovers it.
func TestLoadTailFirstBatchAtBase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Create(dir, 100, testOpts)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, s, 100)
	s.Seal()
	s.Close()
	path := filepath.Join(dir, FileName(100, ".log"))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var b [8]byte
	b[7] = 140 // the first batch's base offset: 140, above the base
	if _, err := f.WriteAt(b[:], 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	s2, err := Open(dir, 100, testOpts, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if err := s2.LoadTail(); !errors.Is(err, index.ErrCorrupt) {
		t.Fatalf("LoadTail of a segment whose first batch is above its base: %v, want index.ErrCorrupt", err)
	}
}
