package logdump

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

// A partition the engine created but nothing was appended to is a
// directory with its partition.metadata and no segment: verify counts it
// and passes, for the data dir and for the partition directory alike,
// while a data dir with no partition at all still fails.
func TestVerifyPartitionWithoutSegments(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	for _, name := range []string{"t-0", "t-1"} {
		dir := filepath.Join(data, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "partition.metadata"), []byte("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sum, err := Verify(io.Discard, data, VerifyOptions{})
	if err != nil || sum.Partitions != 2 || sum.Segments != 0 {
		t.Fatalf("data dir: %+v, %v; want 2 partitions, no error", sum, err)
	}
	sum, err = Verify(io.Discard, filepath.Join(data, "t-0"), VerifyOptions{})
	if err != nil || sum.Partitions != 1 {
		t.Fatalf("partition dir: %+v, %v; want 1 partition, no error", sum, err)
	}
	if _, err := Verify(io.Discard, t.TempDir(), VerifyOptions{}); err == nil {
		t.Fatal("a data dir without partitions passed")
	}
}
