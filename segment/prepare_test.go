package segment

import (
	"os"
	"path/filepath"
	"testing"
)

// TestPrepareStopsAtCapacity: Prepare near the end of a
// segment reserved past the mapped capacity (fallocate of cursor+ahead),
// blocks nothing is ever written to, wasted on a disk that may be nearly
// full. It reserves up to the capacity and no further.
func TestPrepareStopsAtCapacity(t *testing.T) {
	t.Parallel()
	const maxBytes = 1 << 20
	opts := Options{MaxBytes: maxBytes, ReserveAhead: 64 << 10, Mode: WritePwrite}
	dir := t.TempDir()
	s, err := Create(dir, 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Prepare(maxBytes-4096, 8<<20, false, false); err != nil {
		t.Fatal(err)
	}
	if got := s.reserved.Load(); got != maxBytes {
		t.Errorf("reserved %d after Prepare near the end, want the capacity %d", got, maxBytes)
	}
	st, err := os.Stat(filepath.Join(dir, FileName(0, ".log")))
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() > maxBytes {
		t.Errorf("file size %d after Prepare, past the capacity %d", st.Size(), maxBytes)
	}
}
