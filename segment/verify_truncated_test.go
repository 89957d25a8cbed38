package segment

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A segment truncated while VerifyFile reads it (a live partition sealing
// or retiring it) fails the verify with ErrIO instead of killing the
// process with SIGBUS on the mapped pages past the new end.
func TestVerifyFileTruncatedWhileRead(t *testing.T) {
	dir := t.TempDir()
	s, err := Create(dir, 0, testOpts)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, s, 0)
	s.Seal()
	s.Close()
	path := filepath.Join(dir, FileName(0, ".log"))
	verifyMappedHook = func(p string) {
		if err := os.Truncate(p, 0); err != nil {
			t.Error(err)
		}
	}
	defer func() { verifyMappedHook = nil }()
	_, err = VerifyFile(path, 0)
	if !errors.Is(err, ErrIO) {
		t.Fatalf("VerifyFile of a file truncated under it: %v, want ErrIO", err)
	}
}
