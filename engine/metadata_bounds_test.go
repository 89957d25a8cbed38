package engine

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A metadata file read whole at open (the producer-id watermark, a
// partition's topic.config and partition.metadata) that is far larger
// than its format allows is refused as corrupt by its size, not read: here
// each is made a sparse TiB.
func TestMetadataFilesBounded(t *testing.T) {
	t.Parallel()
	for _, file := range []string{pidFile, filepath.Join("t-0", topicConfigFile), filepath.Join("t-0", partitionMetadataFile)} {
		dir := t.TempDir()
		e := openEngine(t, dir, Options{})
		if err := e.CreateTopic("t", 1, map[string]string{"retention.ms": "1000"}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := e.initProducerID(); err != nil {
			t.Fatal(err)
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(filepath.Join(dir, file), 1<<40); err != nil {
			t.Fatal(err)
		}
		e2, err := Open(dir, Options{})
		if err == nil {
			e2.Close()
		}
		if !errors.Is(err, ErrCorruptMetadata) {
			t.Errorf("%s of 1 TiB: Open: %v, want ErrCorruptMetadata", file, err)
		}
	}
}
