package engine

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/errcode"
	"github.com/idemlog/idemlog/internal/testutil"
	"github.com/idemlog/idemlog/partition"
	"github.com/idemlog/idemlog/pidtable"
	"github.com/idemlog/idemlog/producer"
	"github.com/idemlog/idemlog/segment"
)

func idem(t testing.TB, pid int64, epoch int16, seq int32, n int, ts int64) []byte {
	t.Helper()
	return testutil.Batch(t, testutil.BatchSpec{Producer: true, PID: pid, Epoch: epoch, Seq: seq, Records: n,
		Value: func(i int) []byte { return []byte{byte(seq), byte(i)} }, Timestamp: ts})
}

// openEngine opens an engine on dir with opts and closes it when the test
// ends: a Close that fails, other than on an engine the test closed or
// killed itself, fails the test (enginetest.Open for the packages above).
func openEngine(t testing.TB, dir string, opts Options) *Engine {
	t.Helper()
	e, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("cannot close engine on %s: %v", dir, err)
		}
	})
	return e
}

func TestTopicNames(t *testing.T) {
	t.Parallel()
	good := []string{"a", "orders", "a.b_c-D9", string(bytes.Repeat([]byte("x"), 249))}
	bad := []string{"", ".", "..", "a/b", "../x", "a b", "ü", string(bytes.Repeat([]byte("x"), 250)), "a\x00b"}
	for _, n := range good {
		if err := ValidateTopic(n); err != nil {
			t.Errorf("%q rejected: %v", n, err)
		}
	}
	for _, n := range bad {
		if err := ValidateTopic(n); !errors.Is(err, ErrInvalidTopic) {
			t.Errorf("%q accepted", n)
		}
	}
	e := openEngine(t, t.TempDir(), Options{})
	defer e.Close()
	if err := e.CreateTopic("../escape", 1); !errors.Is(err, ErrInvalidTopic) || errcode.Code(err) != errcode.InvalidTopicException {
		t.Fatalf("path-like topic: %v", err)
	}
	if _, err := e.Partition("missing", 0); !errors.Is(err, ErrUnknownTopicOrPartition) || errcode.Code(err) != errcode.UnknownTopicOrPartition {
		t.Fatalf("unknown topic: %v", err)
	}
}

func TestIdempotentAppendAndRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	if err := e.CreateTopic("t", 2); err != nil {
		t.Fatal(err)
	}
	p, _ := e.Partition("t", 1)
	pid, epoch, _ := e.initProducerID()
	// Producer state expires by the batches' own timestamps, so these are
	// current.
	now := time.Now().UnixMilli()
	b0 := idem(t, pid, epoch, 0, 3, now)
	b1 := idem(t, pid, epoch, 3, 2, now+1)
	r0, err := p.Append(b0)
	if err != nil || r0.BaseOffset != 0 || r0.LastOffset != 2 || r0.Duplicate {
		t.Fatalf("first append: %+v %v", r0, err)
	}
	r1, err := p.Append(b1)
	if err != nil || r1.BaseOffset != 3 {
		t.Fatalf("second append: %+v %v", r1, err)
	}
	dup, err := p.Append(b0)
	if err != nil || !dup.Duplicate || dup.BaseOffset != 0 || dup.LastOffset != 2 {
		t.Fatalf("retry: %+v %v", dup, err)
	}
	if p.log.LogEndOffset() != 5 {
		t.Fatalf("log end %d after a retry, want 5", p.log.LogEndOffset())
	}
	if _, err := p.Append(idem(t, pid, epoch, 9, 1, 1)); !errors.Is(err, producer.ErrOutOfOrderSequence) {
		t.Fatalf("gap: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if snaps, _ := producer.ListSnapshots(filepath.Join(dir, "t-1")); len(snaps) == 0 || snaps[len(snaps)-1] != 5 {
		t.Fatalf("snapshots after close: %v, want one at 5", snaps)
	}
	// Clean restart: the last batch's retry is still recognised.
	e = openEngine(t, dir, Options{})
	p, _ = e.Partition("t", 1)
	dup, err = p.Append(b1)
	if err != nil || !dup.Duplicate || dup.BaseOffset != 3 {
		t.Fatalf("retry after clean restart: %+v %v", dup, err)
	}
	if _, err := p.Append(idem(t, pid, epoch, 5, 1, 1)); err != nil {
		t.Fatalf("in-order after restart: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	// Producer ids are unique across restarts.
	e = openEngine(t, dir, Options{})
	defer e.Close()
	pid2, _, _ := e.initProducerID()
	if pid2 <= pid {
		t.Fatalf("producer id %d reused after restart (had %d)", pid2, pid)
	}
}

func TestDedupSurvivesCrash(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := Options{Partition: partition.Options{Segment: segment.Options{MaxBytes: 2048, IndexMaxBytes: 1024}}}
	e := openEngine(t, dir, opts)
	e.CreateTopic("t", 1)
	p, _ := e.Partition("t", 0)
	var last []byte
	seq := int32(0)
	for range 40 {
		last = idem(t, 7, 0, seq, 2, time.Now().UnixMilli())
		if _, err := p.Append(last); err != nil {
			t.Fatal(err)
		}
		seq += 2
	}
	leo := p.log.LogEndOffset()
	// Rolls write snapshots off the append path; wait for one to exist, so
	// that the reopen below starts from a snapshot and replays the tail.
	for i := 0; i < 500; i++ {
		if snaps, _ := producer.ListSnapshots(filepath.Join(dir, "t-0")); len(snaps) > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if snaps, _ := producer.ListSnapshots(filepath.Join(dir, "t-0")); len(snaps) == 0 {
		t.Fatal("no roll snapshots were written")
	}
	// No Close: reopen as after a crash. The state comes from the newest
	// roll snapshot plus replay of the tail.
	e.kill()
	e2 := openEngine(t, dir, opts)
	defer e2.Close()
	p2, _ := e2.Partition("t", 0)
	dup, err := p2.Append(last)
	if err != nil || !dup.Duplicate || dup.LastOffset != leo-1 {
		t.Fatalf("retry after crash: %+v %v (leo %d)", dup, err, leo)
	}
	if _, err := p2.Append(idem(t, 7, 0, seq, 1, 1)); err != nil {
		t.Fatalf("next batch after crash: %v", err)
	}
}

func TestConcurrentSameBatchWrittenOnce(t *testing.T) {
	t.Parallel()
	e := openEngine(t, t.TempDir(), Options{})
	defer e.Close()
	e.CreateTopic("t", 1)
	p, _ := e.Partition("t", 0)
	for round := range 50 {
		b := idem(t, 1, 0, int32(round*2), 2, 1)
		var wg sync.WaitGroup
		results := make([]AppendResult, 8)
		for i := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := p.Append(b)
				if err != nil {
					t.Error(err)
				}
				results[i] = r
			}()
		}
		wg.Wait()
		written := 0
		for _, r := range results {
			if !r.Duplicate {
				written++
			}
			if r.BaseOffset != results[0].BaseOffset {
				t.Fatalf("round %d: offsets differ: %+v", round, results)
			}
		}
		if written != 1 {
			t.Fatalf("round %d: the same batch was written %d times", round, written)
		}
	}
	if p.log.LogEndOffset() != 100 {
		t.Fatalf("log end %d, want 100", p.log.LogEndOffset())
	}
}

func TestProducerLimitAndExpiry(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_000_000_000)
	opts := Options{MaxProducersPerPartition: 3, ProducerIDExpiration: time.Hour, Now: func() time.Time { return now }}
	e := openEngine(t, t.TempDir(), opts)
	defer e.Close()
	e.CreateTopic("t", 1)
	p, _ := e.Partition("t", 0)
	for pid := range int64(3) {
		if _, err := p.Append(idem(t, pid, 0, 0, 1, now.UnixMilli())); err != nil {
			t.Fatal(err)
		}
	}
	leo := p.log.LogEndOffset()
	if _, err := p.Append(idem(t, 99, 0, 0, 1, now.UnixMilli())); !errors.Is(err, pidtable.ErrTooManyProducers) {
		t.Fatalf("producer past the limit: %v", err)
	}
	if p.log.LogEndOffset() != leo || p.Producers() != 3 {
		t.Fatal("a refused producer changed the partition")
	}
	// Non-idempotent appends are not limited.
	plain := batch.NewBuilder(batch.CodecNone)
	plain.Append(1, nil, []byte("x"), nil)
	pb, _ := plain.Build()
	if _, err := p.Append(pb); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Hour)
	if n := e.expireProducers(); n != 3 {
		t.Fatalf("expired %d producers, want 3", n)
	}
	// An expired producer is unknown again: any sequence is accepted.
	if _, err := p.Append(idem(t, 0, 0, 57, 1, now.UnixMilli())); err != nil {
		t.Fatalf("expired producer back at sequence 57: %v", err)
	}
}

func TestProducerSend(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := openEngine(t, dir, Options{Partition: partition.Options{Sync: partition.SyncPolicy{Kind: partition.SyncAlways}}})
	defer e.Close()
	e.CreateTopic("t", 2)
	pr, err := e.NewProducer()
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for part := range 2 {
		p, _ := e.Partition("t", part)
		wg.Add(1)
		go func() {
			defer wg.Done()
			bld := batch.NewBuilder(batch.CodecLZ4)
			for i := range 30 {
				bld.Reset(batch.CodecLZ4)
				bld.Append(int64(i), nil, []byte("v"), nil)
				bld.Append(int64(i), nil, []byte("w"), nil)
				if _, err := pr.Send(p, bld); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for part := range 2 {
		p, _ := e.Partition("t", part)
		if p.log.LogEndOffset() != 60 {
			t.Fatalf("partition %d: log end %d, want 60", part, p.log.LogEndOffset())
		}
		c, err := p.log.Read(58, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		b := batch.Batch(c.Data)
		if b.BaseSequence() != 58 || b.ProducerID() != mustPID(pr) {
			t.Fatalf("partition %d: last batch sequence %d", part, b.BaseSequence())
		}
		c.Release()
	}
	os.RemoveAll(dir)
}

func mustPID(pr *Producer) int64 { pid, _ := pr.ID(); return pid }

func TestPartitionLookupAllocatesNothing(t *testing.T) {
	e := openEngine(t, t.TempDir(), Options{})
	defer e.Close()
	e.CreateTopic("t", 200)
	if n := testing.AllocsPerRun(100, func() {
		if _, err := e.Partition("t", 150); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("Partition lookup: %v allocs, want 0", n)
	}
}

// TestCreateTopicRefusals: a partition count below 1 is an invalid
// partition count (Kafka's INVALID_PARTITIONS), not an invalid topic name,
// which is what it used to report; the internal topics are the engine's
// and cannot be created, or appended to, through the embedding API. Each
// refusal leaves the engine as it was.
func TestCreateTopicRefusals(t *testing.T) {
	e := openEngine(t, t.TempDir(), Options{})
	defer e.Close()
	for _, n := range []int{0, -1} {
		err := e.CreateTopic("t", n)
		if !errors.Is(err, ErrInvalidPartitions) || errors.Is(err, ErrInvalidTopic) {
			t.Errorf("CreateTopic(t, %d) = %v, want ErrInvalidPartitions", n, err)
		}
	}
	for _, topic := range []string{ConsumerOffsetsTopic, TransactionStateTopic} {
		if err := e.CreateTopic(topic, 100); !errors.Is(err, ErrInternalTopic) {
			t.Errorf("CreateTopic(%s, 100) = %v, want ErrInternalTopic", topic, err)
		}
	}
	if got := e.Topics(); len(got) != 0 {
		t.Fatalf("topics after refused creations: %v", got)
	}
	// The offsets store creates its topic on first use; an append to it
	// from outside is refused.
	if err := e.Frontend().CommitOffsets("g", map[TopicPartition]OffsetAndMetadata{{"t", 0}: {Offset: 1}}); err != nil {
		t.Fatal(err)
	}
	p := mustPartition(t, e, ConsumerOffsetsTopic, groupPartition("g"))
	hw := p.HighWatermark()
	bld := batch.NewBuilder(batch.CodecNone)
	bld.Append(1, []byte("k"), []byte("v"), nil)
	b, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Append(b); !errors.Is(err, ErrInternalTopic) {
		t.Fatalf("Append to %s = %v, want ErrInternalTopic", ConsumerOffsetsTopic, err)
	}
	if p.HighWatermark() != hw {
		t.Fatalf("refused append moved the high watermark from %d to %d", hw, p.HighWatermark())
	}
}
