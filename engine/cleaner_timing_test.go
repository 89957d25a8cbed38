package engine

import (
	"flag"
	"os"
	"testing"
	"time"

	"github.com/idemlog/idemlog/partition"
	"github.com/idemlog/idemlog/segment"
)

var offsetCommits = flag.Int("cleaner.commits", 0, "offset commits of TestOffsetCommitsStayBounded (0: skip)")

// TestOffsetCommitsStayBounded commits -cleaner.commits offsets over
// 1,000 keys (one group, 1,000 partitions: one __consumer_offsets
// partition) with the background cleaner running, then reports the
// partition's size and segments, and the time of an engine open plus
// the first offset fetch. Run with -cleaner.commits 1000000 (and more):
// the figures must stay flat as the count grows.
func TestOffsetCommitsStayBounded(t *testing.T) {
	if *offsetCommits == 0 {
		t.Skip("run with -cleaner.commits N")
	}
	dir := t.TempDir()
	opts := Options{Cleaner: CleanerOptions{Backoff: 100 * time.Millisecond},
		Partition: partition.Options{Segment: segment.Options{MaxBytes: 8 << 20}}}
	e := openEngine(t, dir, opts)
	tps := make([]TopicPartition, 1000)
	for i := range tps {
		tps[i] = TopicPartition{Topic: "t", Partition: int32(i)}
	}
	start := time.Now()
	for i := range *offsetCommits {
		if err := e.Frontend().CommitOffsets("g", map[TopicPartition]OffsetAndMetadata{tps[i%len(tps)]: {Offset: int64(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	commitTime := time.Since(start)
	// One more pass of the cleaner over what the last commits left.
	if _, err := e.CleanLogs(); err != nil {
		t.Fatal(err)
	}
	p, err := e.Partition(ConsumerOffsetsTopic, groupPartition("g"))
	if err != nil {
		t.Fatal(err)
	}
	segs := len(p.log.SegmentBases())
	size := dirSize(t, p.log.Dir())
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	opts.Cleaner.Disable = true
	// The best of three opens: the bytes replayed are the same each
	// time, what varies is the machine's load.
	var reopen time.Duration
	for i := range 3 {
		start = time.Now()
		e, err = Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		got, err := e.fetchOffsets("g", tps[:1], false)
		took := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 || took < reopen {
			reopen = took
		}
		last := int64(*offsetCommits - len(tps))
		if got[tps[0]].Offset != last {
			t.Fatalf("offset %d after reopen, want %d", got[tps[0]].Offset, last)
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
	}
	host, _ := os.Hostname()
	t.Logf("%d commits in %v (%.0f/s) on %s: __consumer_offsets partition %d segments, %d bytes; open + first fetch %v (best of 3)",
		*offsetCommits, commitTime.Truncate(time.Millisecond), float64(*offsetCommits)/commitTime.Seconds(), host, segs, size, reopen.Truncate(time.Microsecond))
}
