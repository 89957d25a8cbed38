package segment

import (
	"os"
	"path/filepath"
	"testing"
)

// TestVerifyBelowBase: a segment whose batches lie below its name's base
// (misnamed, or offsets corrupted) is an error, not a stale tail. (Without
// this: it was reported as all stale tail once old batches with valid
// CRCs counted as a tail.)
func TestVerifyBelowBase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Create(dir, 0, crashOpts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := s.Append(testBatch(t, i, 1, 100), int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	to := filepath.Join(dir, FileName(100, ".log"))
	if err := os.Rename(filepath.Join(dir, FileName(0, ".log")), to); err != nil {
		t.Fatal(err)
	}
	r, err := VerifyFile(to, 0)
	t.Logf("report %+v, err %v", r, err)
	if err == nil {
		t.Fatal("batches below the segment base verified without error")
	}
}
