package engine

import (
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
)

// TestConsumeProcessProduce runs a small exactly-once pipeline: read input
// from the group's committed offset, write transformed records and the new
// input offset in one transaction. Midway a second instance takes over
// (the first is a zombie that keeps trying) and the engine restarts; the
// output must hold every input record exactly once and the committed
// offset must be the input's end.
func TestConsumeProcessProduce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	e.CreateTopic("in", 1)
	e.CreateTopic("out", 1)
	in, _ := e.Partition("in", 0)
	const n = 60
	for i := range n {
		b := batch.NewBuilder(batch.CodecNone)
		b.Append(time.Now().UnixMilli(), nil, []byte{byte(i)}, nil)
		v, _ := b.Build()
		if _, err := in.Append(v); err != nil {
			t.Fatal(err)
		}
	}
	inTP := TopicPartition{Topic: "in", Partition: 0}
	// step processes up to k input records with tp; it reports how many.
	step := func(e *Engine, tp *TransactionalProducer, k int) (int, error) {
		in, _ := e.Partition("in", 0)
		out, _ := e.Partition("out", 0)
		got, err := e.fetchOffsets("g", []TopicPartition{inTP}, true)
		if err != nil {
			return 0, err
		}
		from := max(got[inTP].Offset, 0)
		if from >= in.log.HighWatermark() {
			return 0, nil
		}
		c, err := in.log.Read(from, 1<<20)
		if err != nil {
			return 0, err
		}
		defer c.Release()
		var d batch.Decoder
		done := 0
		next := from
		bld := batch.NewBuilder(batch.CodecNone)
		for data := c.Data; len(data) > 0 && done < k; {
			sz, _ := batch.Size(data)
			it, _ := d.Records(batch.Batch(data[:sz]))
			var r batch.Record
			for it.Next(&r) {
				bld.Append(r.Timestamp, nil, []byte{r.Value[0] + 100}, nil)
			}
			next = batch.Batch(data[:sz]).NextOffset()
			data = data[sz:]
			done++
		}
		if _, err := tp.Send(out, bld); err != nil {
			return 0, err
		}
		if err := tp.SendOffsets("g", map[TopicPartition]OffsetAndMetadata{inTP: {Offset: next}}); err != nil {
			return 0, err
		}
		return done, tp.Commit()
	}
	a, err := e.NewTransactionalProducer("pipe", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := step(e, a, 7); err != nil {
			t.Fatal(err)
		}
	}
	// A second instance fences the first, which keeps trying.
	b, err := e.NewTransactionalProducer("pipe", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := step(e, a, 7); err == nil {
		t.Fatal("the zombie instance committed")
	}
	if _, err := step(e, b, 5); err != nil {
		t.Fatal(err)
	}
	// Crash and restart; a new instance resumes from the committed offset.
	e.kill()
	e = openEngine(t, dir, Options{})
	defer e.Close()
	c, err := e.NewTransactionalProducer("pipe", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for {
		k, err := step(e, c, 9)
		if err != nil {
			t.Fatal(err)
		}
		if k == 0 {
			break
		}
	}
	out, _ := e.Partition("out", 0)
	got := readCommittedValues(t, out)
	if len(got) != n {
		t.Fatalf("output has %d records, want %d", len(got), n)
	}
	for i, v := range got {
		if int(v) != i+100 {
			t.Fatalf("output record %d is %d: duplicated or lost input", i, v)
		}
	}
	offs, err := e.fetchOffsets("g", []TopicPartition{inTP}, true)
	if err != nil || offs[inTP].Offset != n {
		t.Fatalf("committed input offset %v, %v; want %d", offs, err, n)
	}
}
