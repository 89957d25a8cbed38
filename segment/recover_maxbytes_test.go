package segment

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRecoverAfterMaxBytesLowered: a segment written under MaxBytes 1 MiB
// and recovered (unclean restart, indexes lost) after segment.bytes was
// lowered to 64 KiB. An offset index sized for 64 KiB would fill, and
// Recover would cut valid data there (indexBytes).
func TestRecoverAfterMaxBytesLowered(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	big := Options{MaxBytes: 1 << 20, IndexIntervalBytes: 4096, ReserveAhead: 64 << 10}
	s, err := Create(dir, 0, big)
	if err != nil {
		t.Fatal(err)
	}
	var off int64
	for {
		b := testBatch(t, int(off), 1, 1000)
		if !s.Fits(len(b), off) {
			break
		}
		if _, err := s.Append(b, off); err != nil {
			t.Fatal(err)
		}
		off++
	}
	size := s.Size()
	if err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// After a crash the indexes may be missing or torn (rebuildable).
	for _, suffix := range []string{".index", ".timeindex"} {
		if err := os.Remove(filepath.Join(dir, FileName(0, suffix))); err != nil {
			t.Fatal(err)
		}
	}
	small := big
	small.MaxBytes = 64 << 10
	s, err = Open(dir, 0, small, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	truncated, err := s.Recover(0, nil)
	t.Logf("wrote %d bytes, offsets [0,%d); after Recover: truncated=%v err=%v size=%d next=%d", size, off, truncated, err, s.Size(), s.NextOffset())
	if s.Size() != size || s.NextOffset() != off {
		t.Fatalf("Recover cut valid data: size %d of %d, next %d of %d", s.Size(), size, s.NextOffset(), off)
	}
}
