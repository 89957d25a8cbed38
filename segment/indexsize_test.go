package segment

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/idemlog/idemlog/index"
)

// TestIndexSizedToSegment: a segment's index files are created no larger
// than its capacity can use (indexBytes), and still never fill before the
// segment does, whatever the batch size: every fill stops on the size
// limit, and the seal adds the time index's final entry.
func TestIndexSizedToSegment(t *testing.T) {
	t.Parallel()
	opts := Options{MaxBytes: 1 << 20, IndexIntervalBytes: 4096, IndexMaxBytes: 10 << 20, ReserveAhead: 64 << 10}
	for _, value := range []int{1, 100, 4000, 4100, 9000, 70000} {
		dir := t.TempDir()
		s, err := Create(dir, 0, opts)
		if err != nil {
			t.Fatal(err)
		}
		for suffix, entry := range map[string]int64{".index": index.OffsetEntrySize, ".timeindex": index.TimeEntrySize} {
			st, err := os.Stat(filepath.Join(dir, FileName(0, suffix)))
			// The files grow as entries fill them (index.OpenOffset):
			// at creation they hold at most a block.
			if limit := min(4096, entry*(opts.MaxBytes/opts.IndexIntervalBytes+16)); err != nil || st.Size() > limit {
				t.Fatalf("%s: %v, %v; want at most %d bytes", suffix, st, err, limit)
			}
		}
		var off int64
		for i := 0; ; i++ {
			b := testBatch(t, i, 1, value)
			if !s.Fits(len(b), off) {
				if s.IndexFull() || s.Size()+int64(len(b)) <= opts.MaxBytes {
					t.Fatalf("%d-byte values: segment full at %d bytes of %d with its index full (%v)", value, s.Size(), opts.MaxBytes, s.IndexFull())
				}
				break
			}
			if _, err := s.Append(b, off); err != nil {
				t.Fatal(err)
			}
			off++
		}
		if err := s.Seal(); err != nil {
			t.Fatalf("%d-byte values: seal: %v", value, err)
		}
		s.Close()
	}
}
