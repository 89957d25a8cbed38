package engine

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/errcode"
)

// A topic with a legal long name (Kafka allows 249 bytes) cannot be
// deleted: "<topic>-<n>.<32 hex>-delete" exceeds NAME_MAX (255), the
// rename fails, and the topic is left half-gone: absent from lookups but
// its directory (with an id the engine no longer knows) blocks recreation.
// Kafka truncates the topic in the delete-dir name for this reason.
func TestDeleteTopicLongName(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	defer e.Close()
	topic := strings.Repeat("x", 249)
	if err := e.CreateTopic(topic, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := mustPartition(t, e, topic, 0).Append(idem(t, 1, 0, 0, 2, time.Now().UnixMilli())); err != nil {
		t.Fatal(err)
	}
	derr := e.DeleteTopic(topic)
	cerr := e.CreateTopic(topic, 1)
	if derr != nil || cerr != nil {
		t.Fatalf("DeleteTopic of a 249-byte topic: %v; CreateTopic again: %v", derr, cerr)
	}
	if hw := mustPartition(t, e, topic, 0).log.HighWatermark(); hw != 0 {
		t.Fatalf("recreated topic has high watermark %d, want 0 (old data back)", hw)
	}
}

// A corrupt topic.config (a line longer than bufio.Scanner's 64 KiB limit,
// then an invalid line) is accepted silently: the scanner's error is never
// checked, so the overrides after it are dropped and Open succeeds with
// the engine's defaults, while the same invalid line alone makes Open fail.
func TestTopicConfigLongLineIgnored(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	if err := e.CreateTopic("t", 1, map[string]string{"retention.ms": "1000"}); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	junk := strings.Repeat("z", 70000) + "\nretention.ms=garbage\n"
	if err := os.WriteFile(filepath.Join(dir, "t-0", topicConfigFile), []byte(junk), 0o644); err != nil {
		t.Fatal(err)
	}
	e2, err := Open(dir, Options{})
	if err == nil {
		e2.Close()
		t.Fatal("Open accepted a corrupt topic.config (scanner error ignored; retention override silently lost)")
	}
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Open: %v, want ErrInvalidConfig", err)
	}
}

// A producer-id-block with a valid CRC but a negative watermark is taken
// as is: InitProducerID then hands out negative producer ids (-1 is "no
// producer id").
func TestJPIDWatermarkNegative(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var buf [12]byte
	binary.BigEndian.PutUint64(buf[:], uint64(0xFFFFFFFFFFFFFFFF)) // -1
	binary.BigEndian.PutUint32(buf[8:], crc32.ChecksumIEEE(buf[:8]))
	if err := os.WriteFile(filepath.Join(dir, pidFile), buf[:], 0o644); err != nil {
		t.Fatal(err)
	}
	// The open refuses the watermark as corrupt (it handed out pid -1).
	if e, err := Open(dir, Options{}); !errors.Is(err, ErrCorruptMetadata) {
		if err == nil {
			e.Close()
		}
		t.Fatalf("Open with a watermark of -1: %v, want ErrCorruptMetadata", err)
	}
}

// A stray partition directory "t-00" is taken as t's partition 0 but keyed
// by its directory name, so Partition("t", 0) cannot find it while Topics
// reports it, and CreateTopic makes a second partition 0 ("t-0").
func TestNonCanonicalPartitionDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	if err := e.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := mustPartition(t, e, "t", 0).Append(idem(t, 1, 0, 0, 2, time.Now().UnixMilli())); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "t-0"), filepath.Join(dir, "t-00")); err != nil {
		t.Fatal(err)
	}
	e = openEngine(t, dir, Options{})
	defer e.Close()
	if n := e.Topics()["t"]; n == 1 {
		if _, err := e.Partition("t", 0); err != nil {
			t.Fatalf("Topics says t has 1 partition, but Partition(t, 0): %v", err)
		}
	}
}

// TestCreateTopicWithConfigCrashLosesConfig: a crash
// after CreateTopicWithConfig made a partition's directory but before its
// topic.config was renamed into place left a partition without overrides,
// which the retried CreateTopicWithConfig kept. The directory is now built
// under a temporary name and renamed when complete: a crash leaves only
// that temporary directory, which Open removes, and the retry creates the
// partition with its config.
func TestCreateTopicWithConfigCrashLosesConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	e.kill()
	// The crash state now: the temporary directory, config half written.
	tmp := filepath.Join(dir, createDirPrefix+"0123456789abcdef")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, topicConfigFile+".tmp"), []byte("retention.ms=1000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e = openEngine(t, dir, Options{})
	defer e.Close()
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("Open left the interrupted creation's directory: %v", err)
	}
	if n := e.Topics()["t"]; n != 0 {
		t.Fatalf("topic t has %d partitions after the interrupted creation", n)
	}
	cfg := map[string]string{"retention.ms": "1000"}
	if err := e.CreateTopic("t", 1, cfg); err != nil {
		t.Fatal(err)
	}
	got, err := readTopicConfig(filepath.Join(dir, "t-0"))
	if err != nil || got["retention.ms"] != "1000" {
		t.Fatalf("retried CreateTopicWithConfig succeeded, but t-0's config is %v (%v), want retention.ms=1000", got, err)
	}
}

// A __transaction_state record with an unknown value version makes Open
// fail with an untyped error (errTxnValue is errors.New, no errcode).
func TestTxnStateCorruptTypedError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	if _, err := e.coordinator(); err != nil {
		t.Fatal(err)
	}
	b := batch.NewBuilder(batch.CodecNone)
	b.Append(time.Now().UnixMilli(), []byte("tx"), []byte{0, 9, 1, 2, 3}, nil)
	v, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mustPartition(t, e, txnStateTopic, 0).log.Append(v); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = Open(dir, Options{})
	if err == nil {
		t.Fatal("Open accepted a corrupt transaction-state record")
	}
	var ce *errcode.Error
	if !errors.As(err, &ce) {
		t.Fatalf("Open: untyped error %v", err)
	}
}

// Corrupt partition.metadata and producer-id-block make Open fail with
// untyped errors (plain fmt.Errorf, no sentinel to errors.Is against).
func TestCorruptMetadataTypedError(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ file, content string }{
		{filepath.Join("t-0", partitionMetadataFile), "version: 7\ntopic_id: x\n"},
		{pidFile, "short"},
	} {
		dir := t.TempDir()
		e := openEngine(t, dir, Options{})
		if err := e.CreateTopic("t", 1); err != nil {
			t.Fatal(err)
		}
		if _, _, err := e.initProducerID(); err != nil {
			t.Fatal(err)
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, c.file), []byte(c.content), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Open(dir, Options{})
		var ce *errcode.Error
		if err == nil || !errors.As(err, &ce) {
			t.Errorf("corrupt %s: Open: %v, want a typed error", c.file, err)
		}
	}
}

// TestDataDirLocked: nothing stopped two engines from
// opening one data dir, which would then hand out the same producer ids
// and write the same segments. The second Open fails with ErrDirLocked
// until the first engine is closed or killed.
func TestDataDirLocked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrDirLocked) {
		t.Fatalf("second Open of an open data dir: %v, want ErrDirLocked", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openEngine(t, dir, Options{})
	e.kill()
	e = openEngine(t, dir, Options{})
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}
