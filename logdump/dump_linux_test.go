//go:build linux

package logdump

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/idemlog/idemlog/internal/testutil"
	"github.com/idemlog/idemlog/segment"
)

// dumpTestBatch returns one batch of n records stamped at base.
func dumpTestBatch(t *testing.T, base int64, n int) []byte {
	t.Helper()
	return testutil.Batch(t, testutil.BatchSpec{Records: n, Value: func(int) []byte { return []byte("value") },
		Timestamp: 1700000000000 + base, TimestampStep: 1, BaseOffset: base})
}

func dumpWriteSegment(t *testing.T, dir string, base int64, data []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, segment.FileName(base, ".log")), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDumpZeroTailOfSealedSegment: logdump/doc.go says "A torn tail
// (fewer bytes than the framing or the length promise), an impossible
// length, or a magic other than 2 leaves nothing to trust ... so the walk
// stops there ... Either way Dump returns an error", and `idemlog dump
// --help` exits 1 "if a file is corrupt, truncated". A segment of a
// cleanly closed partition (no preallocation left) whose last batch was
// replaced by zeros (a tail lost to unsynced pages) dumps with no error:
// any run of zeros to the end is taken for preallocated space, whatever
// the file.
func TestDumpZeroTailOfSealedSegment(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "t-0")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	first := dumpTestBatch(t, 0, 2)
	lost := dumpTestBatch(t, 2, 2)
	dumpWriteSegment(t, dir, 0, append(first, make([]byte, len(lost))...))
	dumpWriteSegment(t, dir, 4, dumpTestBatch(t, 4, 2))
	if err := os.WriteFile(filepath.Join(dir, ".kafka_cleanshutdown"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := DumpPath(io.Discard, dir, Options{}); err == nil {
		t.Fatalf("dump of a closed partition whose first segment ends in %d zero bytes (its batch at offset 2 lost) returned no error", len(lost))
	}
	if _, err := Verify(io.Discard, dir, VerifyOptions{}); err == nil {
		t.Fatalf("verify passed it too")
	}
}
