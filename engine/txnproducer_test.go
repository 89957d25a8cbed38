package engine

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
)

// A Send fails with an abortable error (MESSAGE_TOO_LARGE); before the
// program aborts, the coordinator aborts the transaction for its timeout
// and fences the producer (spec 3.6). The program's Abort answers
// ErrProducerFenced: the producer now knows it is fenced. engine/doc.go
// (Caveats): "once fenced, every call fails with ErrProducerFenced"
// (Kafka's FATAL_ERROR state: every later call rethrows the fence). But
// Abort does not record the fence (only Send and SendOffsets set
// tp.failed), so the later Commit, Send and SendOffsets keep answering
// the old abortable error ("must be aborted"), which tells the program
// to Abort again, for ever.
func TestTxnFencedAbortKeepsAbortableState(t *testing.T) {
	t.Parallel()
	now := time.Now()
	e := openEngine(t, t.TempDir(), Options{Now: func() time.Time { return now }})
	defer e.Close()
	if err := e.CreateTopic("in", 1); err != nil {
		t.Fatal(err)
	}
	if err := e.CreateTopic("out", 1, map[string]string{"max.message.bytes": "1000"}); err != nil {
		t.Fatal(err)
	}
	out := mustPartition(t, e, "out", 0)
	c, err := e.coordinator()
	if err != nil {
		t.Fatal(err)
	}
	tp, err := e.NewTransactionalProducer("slow", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	in := TopicPartition{Topic: "in", Partition: 0}
	if err := tp.SendOffsets("g", map[TopicPartition]OffsetAndMetadata{in: {Offset: 3}}); err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("x"), 4000)
	bld := batch.NewBuilder(batch.CodecNone)
	bld.Append(now.UnixMilli(), nil, big, nil)
	if _, err := tp.Send(out, bld); err == nil || errors.Is(err, ErrProducerFenced) {
		t.Fatalf("oversized Send: %v, want an abortable error", err)
	}
	now = now.Add(2 * time.Second)
	if n, err := c.AbortTimedOut(); n != 1 || err != nil {
		t.Fatalf("timed-out aborts: %d %v", n, err)
	}
	if err := tp.Abort(); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("Abort after the timeout: %v, want ErrProducerFenced", err)
	}
	// The producer has been told it is fenced: every call fails so.
	small := batch.NewBuilder(batch.CodecNone)
	small.Append(now.UnixMilli(), nil, []byte("y"), nil)
	_, sendErr := tp.Send(out, small)
	calls := []struct {
		name string
		err  error
	}{
		{"Commit", tp.Commit()},
		{"Send", sendErr},
		{"SendOffsets", tp.SendOffsets("g", map[TopicPartition]OffsetAndMetadata{in: {Offset: 4}})},
	}
	for _, call := range calls {
		if !errors.Is(call.err, ErrProducerFenced) {
			t.Errorf("%s after Abort answered ErrProducerFenced: %v, want ErrProducerFenced", call.name, call.err)
		}
	}
}
