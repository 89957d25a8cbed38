package engine

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
)

func clientBatchBuilder(codec batch.Codec, vals ...string) *batch.Builder {
	b := batch.NewBuilder(codec)
	for _, v := range vals {
		b.Append(time.Now().UnixMilli(), nil, []byte(v), nil)
	}
	return b
}

// clientReadAll returns every value a consumer at isolation sees in p from
// the log start, polling maxBytes at a time until the position stops.
func clientReadAll(t *testing.T, e *Engine, p *Partition, iso Isolation, maxBytes int) []string {
	t.Helper()
	c := e.NewConsumer("", iso)
	if err := c.Assign(p); err != nil {
		t.Fatal(err)
	}
	var got []string
	for range 10000 {
		before := c.Position(p)
		if _, err := c.Poll(p, maxBytes, func(r *batch.Record) error {
			got = append(got, string(r.Value))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if c.Position(p) < before {
			t.Fatalf("position went back from %d to %d", before, c.Position(p))
		}
		if c.Position(p) == before {
			return got
		}
	}
	t.Fatal("consumer never stopped")
	return nil
}

// A Send inside a transaction fails (here MESSAGE_TOO_LARGE from the
// partition) after the transaction already holds the consumer's input
// offsets (consume-process-produce). Kafka's producer moves to
// ABORTABLE_ERROR on any failed send: commitTransaction then throws and
// only abortTransaction is allowed. TransactionalProducer.Commit instead
// commits what was written: the input offsets are committed while the
// output they stand for was never written, so the input is lost.
func TestTxnCommitAfterFailedSendCommitsPartialTransaction(t *testing.T) {
	t.Parallel()
	e := openEngine(t, t.TempDir(), Options{})
	defer e.Close()
	if err := e.CreateTopic("in", 1); err != nil {
		t.Fatal(err)
	}
	if err := e.CreateTopic("out", 1, map[string]string{"max.message.bytes": "1000"}); err != nil {
		t.Fatal(err)
	}
	out := mustPartition(t, e, "out", 0)
	tp, err := e.NewTransactionalProducer("cpp", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	in := TopicPartition{Topic: "in", Partition: 0}
	if err := tp.SendOffsets("g", map[TopicPartition]OffsetAndMetadata{in: {Offset: 10}}); err != nil {
		t.Fatal(err)
	}
	big := string(bytes.Repeat([]byte("x"), 4000))
	if _, err := tp.Send(out, clientBatchBuilder(batch.CodecNone, big)); err == nil {
		t.Fatal("a 4000-byte batch was accepted by a topic with max.message.bytes 1000")
	}
	if err := tp.Commit(); err == nil {
		t.Errorf("Commit after a failed Send returned nil, want an error until Abort (Kafka's ABORTABLE_ERROR)")
	}
	if err := tp.Abort(); err != nil {
		t.Fatal(err)
	}
	offs, err := e.fetchOffsets("g", []TopicPartition{in}, true)
	if err != nil {
		t.Fatal(err)
	}
	if offs[in].Offset == 10 {
		t.Errorf("the group's input offset 10 is committed while the output it stands for was never written")
	}
}

// A producer that was told it is fenced (ProducerFenced from Send) must
// fail every later call, as Kafka's producer does in its fatal state.
// TransactionalProducer.Commit returns nil, so a consume-process-produce
// loop of a zombie instance believes its transaction committed.
func TestTxnCommitAfterFencedSendReturnsNil(t *testing.T) {
	t.Parallel()
	e := openEngine(t, t.TempDir(), Options{})
	defer e.Close()
	if err := e.CreateTopic("out", 1); err != nil {
		t.Fatal(err)
	}
	out := mustPartition(t, e, "out", 0)
	old, err := e.NewTransactionalProducer("z", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.NewTransactionalProducer("z", time.Minute); err != nil {
		t.Fatal(err)
	}
	_, err = old.Send(out, clientBatchBuilder(batch.CodecNone, "zombie"))
	if !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("Send of a fenced instance: %v, want ErrProducerFenced", err)
	}
	if err := old.Commit(); err == nil {
		t.Errorf("Commit after a ProducerFenced Send returned nil, want ErrProducerFenced")
	}
}

// read_committed over interleaved transactions of several producers, some
// aborted, compressed and not, read a few bytes at a time: exactly the
// committed records, in order, no control batch.
func TestConsumerReadCommittedInterleaved(t *testing.T) {
	t.Parallel()
	e := openEngine(t, t.TempDir(), Options{})
	defer e.Close()
	if err := e.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	p := mustPartition(t, e, "t", 0)
	const n = 3
	tps := make([]*TransactionalProducer, n)
	for i := range tps {
		var err error
		if tps[i], err = e.NewTransactionalProducer(fmt.Sprintf("x%d", i), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	idp, err := e.NewProducer()
	if err != nil {
		t.Fatal(err)
	}
	var want, all []string
	pending := make([][]string, n)
	codecs := []batch.Codec{batch.CodecNone, batch.CodecZstd, batch.CodecGzip}
	for round := range 12 {
		for i, tp := range tps {
			v1 := fmt.Sprintf("r%d-p%d-a", round, i)
			v2 := fmt.Sprintf("r%d-p%d-b", round, i)
			if _, err := tp.Send(p, clientBatchBuilder(codecs[(round+i)%3], v1, v2)); err != nil {
				t.Fatal(err)
			}
			pending[i] = append(pending[i], v1, v2)
			all = append(all, v1, v2)
		}
		v := fmt.Sprintf("r%d-plain", round)
		if _, err := idp.Send(p, clientBatchBuilder(codecs[round%3], v)); err != nil {
			t.Fatal(err)
		}
		want = append(want, v)
		all = append(all, v)
		i := round % n
		if (round/n)%2 == 0 && i != 1 {
			if err := tps[i].Commit(); err != nil {
				t.Fatal(err)
			}
			want = append(want, pending[i]...)
		} else if err := tps[i].Abort(); err != nil {
			t.Fatal(err)
		}
		pending[i] = nil
	}
	for i, tp := range tps {
		if err := tp.Abort(); err != nil {
			t.Fatal(err)
		}
		pending[i] = nil
	}
	for _, maxBytes := range []int{1, 200, 1 << 20} {
		got := clientReadAll(t, e, p, ReadCommitted, maxBytes)
		if !sameSet(got, want) {
			t.Errorf("maxBytes %d: read_committed got %d records %v\nwant %d %v", maxBytes, len(got), got, len(want), want)
		}
		got = clientReadAll(t, e, p, ReadUncommitted, maxBytes)
		if len(got) != len(all) {
			t.Errorf("maxBytes %d: read_uncommitted got %d records, want %d", maxBytes, len(got), len(all))
		}
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]int{}
	for _, x := range a {
		m[x]++
	}
	for _, x := range b {
		m[x]--
		if m[x] < 0 {
			return false
		}
	}
	return true
}

// Producer.Send stamps the builder with its producer id, epoch and
// sequence but keeps whatever transactional attribute the builder had
// (one set up for, or shared with, a TransactionalProducer): the
// idempotent producer then opens a transaction in the partition that no
// coordinator knows and nothing ever ends. The LSO stays at its batch for
// good and read_committed consumers see nothing written after it.
func TestProducerSendsTransactionalBatch(t *testing.T) {
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
	bld := clientBatchBuilder(batch.CodecNone, "a")
	bld.SetTransactional(true)
	if _, err := pr.Send(p, bld); err != nil {
		t.Fatal(err)
	}
	bld.Reset(batch.CodecNone)
	bld.Append(time.Now().UnixMilli(), nil, []byte("b"), nil)
	if _, err := pr.Send(p, bld); err != nil {
		t.Errorf("the idempotent producer is stuck: %v", err)
	}
	if lso, hw := p.LastStableOffset(), p.log.HighWatermark(); lso != hw {
		t.Errorf("after an idempotent Producer's sends: LSO %d, high watermark %d (a transaction no coordinator knows is open)", lso, hw)
	}
	if got := clientReadAll(t, e, p, ReadCommitted, 1<<20); len(got) == 0 {
		t.Errorf("read_committed sees nothing of the idempotent producer's records")
	}
}
