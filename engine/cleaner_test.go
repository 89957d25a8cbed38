package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/partition"
	"github.com/idemlog/idemlog/segment"
)

// readKeys returns the newest value of every key in the partition and
// the number of records read.
func readKeys(t *testing.T, p *Partition) (map[string]string, int) {
	t.Helper()
	out := map[string]string{}
	n := 0
	var dec batch.Decoder
	l := p.log
	for off := l.LogStartOffset(); off < l.HighWatermark(); {
		ch, err := l.Read(off, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		bi := batch.NewIter(ch.Data)
		for bi.Next() {
			it, err := dec.Records(bi.Batch())
			if err != nil {
				t.Fatal(err)
			}
			var r batch.Record
			for it.Next(&r) {
				out[string(r.Key)] = string(r.Value)
				n++
			}
		}
		if err := bi.Err(); err != nil {
			t.Fatal(err)
		}
		off = ch.NextOffset
		ch.Release()
	}
	return out, n
}

func appendKV(t *testing.T, p *Partition, key, value string) {
	t.Helper()
	b := batch.NewBuilder(batch.CodecNone)
	b.Append(time.Now().UnixMilli(), []byte(key), []byte(value), nil)
	v, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Append(append([]byte(nil), v...)); err != nil {
		t.Fatal(err)
	}
}

// A topic with cleanup.policy=compact keeps the newest value of every
// key; one with delete (the default) is not touched.
func TestCleanLogsCompactsCompactedTopics(t *testing.T) {
	e := openEngine(t, t.TempDir(), Options{Cleaner: CleanerOptions{Disable: true}})
	defer e.Close()
	for _, topic := range []string{"kv", "events"} {
		cfg := map[string]string{"segment.bytes": "4096"}
		if topic == "kv" {
			cfg["cleanup.policy"] = "compact"
		}
		if err := e.CreateTopic(topic, 1, cfg); err != nil {
			t.Fatal(err)
		}
	}
	kv, _ := e.Partition("kv", 0)
	events, _ := e.Partition("events", 0)
	const keys, writes = 20, 2000
	for i := range writes {
		for _, p := range []*Partition{kv, events} {
			appendKV(t, p, fmt.Sprintf("k%d", i%keys), fmt.Sprintf("v%d", i))
		}
	}
	passes, err := e.CleanLogs()
	if err != nil || passes != 1 {
		t.Fatalf("CleanLogs: %d passes, %v; want 1 (only the compacted topic)", passes, err)
	}
	got, n := readKeys(t, kv)
	for k := range keys {
		if want := fmt.Sprintf("v%d", writes-keys+k); got[fmt.Sprintf("k%d", k)] != want {
			t.Fatalf("k%d = %q, want %q", k, got[fmt.Sprintf("k%d", k)], want)
		}
	}
	// What is left: a record per key in the cleaned segment, and the
	// active segment's records.
	if n > keys+100 {
		t.Fatalf("%d records left in the compacted topic", n)
	}
	if _, n := readKeys(t, events); n != writes {
		t.Fatalf("%d records in the delete topic, want %d", n, writes)
	}
}

// The consumer-offsets topic is compacted: many commits of a few keys
// leave a log bounded by the keys, and a reopened engine fetches the
// newest offsets (and no deleted group) from what survived.
func TestConsumerOffsetsCompacted(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Cleaner: CleanerOptions{Disable: true},
		Partition: partition.Options{Segment: segment.Options{MaxBytes: 32 << 10}}}
	e := openEngine(t, dir, opts)
	tps := make([]TopicPartition, 10)
	for i := range tps {
		tps[i] = TopicPartition{Topic: "t", Partition: int32(i)}
	}
	const commits = 20000
	for i := range commits {
		if err := e.Frontend().CommitOffsets("g", map[TopicPartition]OffsetAndMetadata{tps[i%len(tps)]: {Offset: int64(i)}}); err != nil {
			t.Fatal(err)
		}
		if err := e.Frontend().CommitOffsets("gone", map[TopicPartition]OffsetAndMetadata{tps[0]: {Offset: int64(i)}}); err != nil {
			t.Fatal(err)
		}
		if i%2000 == 1999 {
			if _, err := e.CleanLogs(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := e.deleteGroupOffsets("gone"); err != nil {
		t.Fatal(err)
	}
	var size int64
	for i := range ConsumerOffsetsPartitions {
		p, err := e.Partition(ConsumerOffsetsTopic, i)
		if err != nil {
			t.Fatal(err)
		}
		size += dirSize(t, p.log.Dir())
	}
	// Uncompacted, 40,000 commits take about 4 MB.
	if size > 600<<10 {
		t.Fatalf("__consumer_offsets holds %d bytes after compaction", size)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openEngine(t, dir, opts)
	defer e.Close()
	got, err := e.fetchOffsets("g", tps, false)
	if err != nil {
		t.Fatal(err)
	}
	for i, tp := range tps {
		if want := int64(commits - len(tps) + i); got[tp].Offset != want {
			t.Fatalf("%v at %d after reopen, want %d", tp, got[tp].Offset, want)
		}
	}
	if had := e.groupHasOffsets("gone"); had {
		t.Fatal("a deleted group's offsets came back")
	}
}

// The background cleaner compacts without being called.
func TestCleanerRunsInBackground(t *testing.T) {
	e := openEngine(t, t.TempDir(), Options{Cleaner: CleanerOptions{Backoff: 10 * time.Millisecond}})
	defer e.Close()
	if err := e.CreateTopic("kv", 1, map[string]string{"cleanup.policy": "compact", "segment.bytes": "4096"}); err != nil {
		t.Fatal(err)
	}
	p, _ := e.Partition("kv", 0)
	for i := range 1000 {
		appendKV(t, p, fmt.Sprintf("k%d", i%5), fmt.Sprint(i))
	}
	deadline := time.Now().Add(30 * time.Second)
	for p.log.FirstDirtyOffset() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the background cleaner did not clean within 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// dirSize is the size of the segment files (.log) in dir.
func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".log") {
			continue
		}
		fi, err := os.Stat(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		n += fi.Size()
	}
	return n
}

// The internal topics describe what they do: compacted, retention off.
func TestInternalTopicsDescribeCompaction(t *testing.T) {
	e := openEngine(t, t.TempDir(), Options{Cleaner: CleanerOptions{Disable: true}})
	defer e.Close()
	if err := e.Frontend().CommitOffsets("g", map[TopicPartition]OffsetAndMetadata{{Topic: "t"}: {Offset: 1}}); err != nil {
		t.Fatal(err)
	}
	entries, err := e.Frontend().TopicConfig(ConsumerOffsetsTopic)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"cleanup.policy": "compact", "retention.ms": "-1", "segment.bytes": "8388608"}
	for _, c := range entries {
		if v, ok := want[c.Name]; ok && c.Value != v {
			t.Fatalf("%s = %q, want %q", c.Name, c.Value, v)
		}
	}
}
