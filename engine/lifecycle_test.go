package engine

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/partition"
	"github.com/idemlog/idemlog/segment"
)

// A negative partition index must not resolve: Partition builds the key
// "<topic>-<index>", and ("t", -1) spells "t--1", which is partition 1 of
// topic "t-". A Kafka client producing to partition -1 of "t" writes into
// another topic.
func TestPartitionNegativeIndexAliasesOtherTopic(t *testing.T) {
	t.Parallel()
	e := openEngine(t, t.TempDir(), Options{})
	defer e.Close()
	if err := e.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	if err := e.CreateTopic("t-", 2); err != nil {
		t.Fatal(err)
	}
	p, err := e.Partition("t", -1)
	if err == nil {
		t.Fatalf("Partition(\"t\", -1) = %s-%d, want ErrUnknownTopicOrPartition", p.Topic(), p.Index())
	}
	if !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatalf("Partition(\"t\", -1): %v", err)
	}
}

// A closed engine hands out producer ids and writes the producer-id
// watermark into a data dir it no longer holds the lock of. Another engine
// that opened the dir meanwhile has handed out ids past it: the closed one
// hands out an id already in use, and its watermark write rolls the file
// back, so the next engine on the dir hands out the other's ids again.
func TestInitProducerIDAfterClose(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e1 := openEngine(t, dir, Options{})
	if err := e1.Close(); err != nil {
		t.Fatal(err)
	}
	e2 := openEngine(t, dir, Options{})
	used := map[int64]bool{}
	for range 2*pidBlockSize + 1 {
		pid, _, err := e2.initProducerID()
		if err != nil {
			t.Fatal(err)
		}
		used[pid] = true
	}
	pid, _, err := e1.initProducerID()
	if !errors.Is(err, ErrClosed) {
		t.Errorf("InitProducerID on a closed engine: pid %d, err %v; want ErrClosed", pid, err)
	}
	if err := e2.Close(); err != nil {
		t.Fatal(err)
	}
	e3 := openEngine(t, dir, Options{})
	defer e3.Close()
	pid3, _, err := e3.initProducerID()
	if err != nil {
		t.Fatal(err)
	}
	if used[pid3] {
		t.Fatalf("producer id %d handed out twice (by the engine before the restart and after it)", pid3)
	}
}

// Producer.Send to a partition of a deleted topic: DeleteTopic promises
// ErrUnknownTopicOrPartition to appends in flight (what a client retries
// after a metadata refresh), which Partition.Append gives; Send bypasses
// Partition.gone and returns the bare partition.ErrClosed.
func TestSendToDeletedTopic(t *testing.T) {
	t.Parallel()
	e := openEngine(t, t.TempDir(), Options{})
	defer e.Close()
	if err := e.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	p := mustPartition(t, e, "t", 0)
	pr, err := e.NewProducer()
	if err != nil {
		t.Fatal(err)
	}
	bld := batch.NewBuilder(batch.CodecNone)
	bld.Append(time.Now().UnixMilli(), nil, []byte("a"), nil)
	if _, err := pr.Send(p, bld); err != nil {
		t.Fatal(err)
	}
	if err := e.DeleteTopic("t"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Append(idem(t, 99, 0, 0, 1, time.Now().UnixMilli())); !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatalf("Append to the deleted partition: %v", err)
	}
	bld = batch.NewBuilder(batch.CodecNone)
	bld.Append(time.Now().UnixMilli(), nil, []byte("b"), nil)
	if _, err := pr.Send(p, bld); !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatalf("Send to the deleted partition: %v; want ErrUnknownTopicOrPartition", err)
	}
}

// A delete of a topic with a long name renames its directory to a
// shortened "<prefix>.<32 hex>-delete" (retirePartitions). Should the
// process stop before the removal (or the removal fail, which DeleteTopic
// does not report, saying Open removes it), Open must remove it; but
// isDeleteDir asks parsePartitionName about the shortened prefix, which is
// no partition name, so the directory (the partition's data) stays for
// ever.
func TestLongNameDeleteLeftoverRemovedAtOpen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	topic := strings.Repeat("x", 249)
	e := openEngine(t, dir, Options{})
	if err := e.CreateTopic(topic, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := mustPartition(t, e, topic, 0).Append(idem(t, 1, 0, 0, 2, time.Now().UnixMilli())); err != nil {
		t.Fatal(err)
	}
	e.kill()
	// The name retirePartitions gives it: the base cut so that the whole
	// fits in 255 bytes.
	base := partitionKey(topic, 0)
	tail := "." + strings.Repeat("ab", 16) + deleteDirSuffix
	left := filepath.Join(dir, base[:min(len(base), 255-len(tail))]+tail)
	if err := os.Rename(filepath.Join(dir, base), left); err != nil {
		t.Fatal(err)
	}
	e = openEngine(t, dir, Options{})
	defer e.Close()
	if _, ok := e.Topics()[topic]; ok {
		t.Fatal("deleted topic is back")
	}
	if _, err := os.Stat(left); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("deletion leftover %s... not removed at Open: %v", filepath.Base(left)[:20], err)
	}
}

// retention.ms is a Kafka long (milliseconds); a value above
// MaxInt64/1e6 (292 years) overflows time.Duration in the topic config's
// conversion. 18446744073710 ms (~584 years, a legal Kafka value) wraps to
// under a millisecond: every closed segment is deleted at once.
func TestRetentionMsOverflowDeletesEverything(t *testing.T) {
	t.Parallel()
	now := time.Now()
	e := openEngine(t, t.TempDir(), Options{Now: func() time.Time { return now }})
	defer e.Close()
	err := e.CreateTopic("t", 1, map[string]string{
		"retention.ms":  "18446744073710",
		"segment.bytes": "4096",
	})
	if err != nil {
		// A legal Kafka value (retention.ms is a long, at least -1).
		t.Fatalf("CreateTopicWithConfig: %v", err)
	}
	p := mustPartition(t, e, "t", 0)
	ts := now.Add(-time.Hour).UnixMilli() // an hour old: far inside 584 years
	for seq := int32(0); p.log.HighWatermark() < 1000; seq += 10 {
		if _, err := p.Append(idem(t, 1, 0, seq, 10, ts)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.applyRetention(); err != nil {
		t.Fatal(err)
	}
	if start := p.log.LogStartOffset(); start != 0 {
		t.Fatalf("retention.ms=18446744073710 deleted hour-old data: log start %d", start)
	}
}

// After Close, an append through a partition handle fails with the
// engine's ErrClosed (what the Kafka listener maps to a retriable
// NOT_LEADER, "a broker that is shutting down"), not with the log's
// UNKNOWN_SERVER_ERROR.
func TestAppendAfterCloseErrClosed(t *testing.T) {
	t.Parallel()
	e := openEngine(t, t.TempDir(), Options{Partition: partition.Options{Segment: segment.Options{MaxBytes: 1 << 20}}})
	if err := e.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	p := mustPartition(t, e, "t", 0)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Append(idem(t, 1, 0, 0, 1, time.Now().UnixMilli())); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after Close: %v; want engine.ErrClosed", err)
	}
}

// Close leaves the engine's consumer-offsets store in the package-level
// offsetStores map (it is dropped only if someone calls offsets() on the
// closed engine again): every Open/Close cycle that used offsets leaks the
// engine, its partitions' producer tables and the committed offsets.
func TestOffsetStoreReleasedAtClose(t *testing.T) {
	t.Parallel()
	collected := make(chan struct{})
	func() {
		e, err := Open(t.TempDir(), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.CreateTopic("t", 1); err != nil {
			t.Fatal(err)
		}
		if err := e.Frontend().CommitOffsets("g", map[TopicPartition]OffsetAndMetadata{{"t", 0}: {0, ""}}); err != nil {
			t.Fatal(err)
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		runtime.AddCleanup(e, func(ch chan struct{}) { close(ch) }, collected)
	}()
	for range 50 {
		runtime.GC()
		select {
		case <-collected:
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatal("a closed engine that used consumer offsets is never collected")
}

// segment.ms is a Kafka long (milliseconds, at least 1); Long.MAX_VALUE is
// the usual "never roll by age". Its conversion to time.Duration
// overflows to -1 ms, and every batch is then "too old" for its segment:
// each append rolls a new segment.
func TestSegmentMsOverflowRollsEveryAppend(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	defer e.Close()
	if err := e.CreateTopic("t", 1, map[string]string{"segment.ms": "9223372036854775807"}); err != nil {
		t.Fatalf("CreateTopicWithConfig: %v", err)
	}
	p := mustPartition(t, e, "t", 0)
	for seq := int32(0); seq < 10; seq++ {
		if _, err := p.Append(idem(t, 1, 0, seq, 1, time.Now().UnixMilli())); err != nil {
			t.Fatal(err)
		}
	}
	logs, err := filepath.Glob(filepath.Join(p.log.Dir(), "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	if len(logs) != 1 {
		t.Fatalf("10 small appends with segment.ms=Long.MAX_VALUE made %d segments, want 1", len(logs))
	}
}

// retention.bytes=0 is a legal Kafka value meaning "keep no closed
// segment" (UnifiedLog deletes while size - 0 - segment.size >= 0). The
// topic config accepts it and hands 0 to the partition, where 0 means
// "off": the topic keeps everything for ever.
func TestRetentionBytesZeroIsUnlimited(t *testing.T) {
	t.Parallel()
	e := openEngine(t, t.TempDir(), Options{})
	defer e.Close()
	err := e.CreateTopic("t", 1, map[string]string{"retention.bytes": "0", "segment.bytes": "4096"})
	if err != nil {
		t.Fatalf("CreateTopicWithConfig: %v", err)
	}
	p := mustPartition(t, e, "t", 0)
	for seq := int32(0); p.log.HighWatermark() < 1000; seq += 10 {
		if _, err := p.Append(idem(t, 1, 0, seq, 10, time.Now().UnixMilli())); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.applyRetention(); err != nil {
		t.Fatal(err)
	}
	if start := p.log.LogStartOffset(); start == 0 {
		t.Fatalf("retention.bytes=0 kept every segment: log start %d, high watermark %d", start, p.log.HighWatermark())
	}
}
