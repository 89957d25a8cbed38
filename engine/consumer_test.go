package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
)

func consumerSend(t *testing.T, pr *Producer, p *Partition, n int) {
	t.Helper()
	for i := range n {
		bld := batch.NewBuilder(batch.CodecNone)
		bld.Append(time.Now().UnixMilli(), nil, fmt.Appendf(nil, "v%d", i), nil)
		if _, err := pr.Send(p, bld); err != nil {
			t.Fatal(err)
		}
	}
}

// A consumer read a topic, the topic is deleted (its committed offsets go
// with it, engine.DeleteTopic) and created again under the name. The
// consumer's Commit still holds the deleted partition's position and
// writes it as the group's offset of the new topic: a new consumer of the
// group then starts past records it never read. Kafka answers an
// OffsetCommit for a partition that does not exist with
// UNKNOWN_TOPIC_OR_PARTITION (the Kafka listener here does too, via
// admitOffset); the engine's Consumer.Commit does not check.
func TestConsumerCommitResurrectsDeletedTopicOffsets(t *testing.T) {
	t.Parallel()
	e := openEngine(t, t.TempDir(), Options{})
	defer e.Close()
	if err := e.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	pr, err := e.NewProducer()
	if err != nil {
		t.Fatal(err)
	}
	old := mustPartition(t, e, "t", 0)
	consumerSend(t, pr, old, 5)
	c := e.NewConsumer("g", ReadCommitted)
	if err := c.Assign(old); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Poll(old, 1<<20, func(*batch.Record) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if c.Position(old) != 5 {
		t.Fatalf("position %d, want 5", c.Position(old))
	}
	if err := e.DeleteTopic("t"); err != nil {
		t.Fatal(err)
	}
	if err := e.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	fresh := mustPartition(t, e, "t", 0)
	pr2, err := e.NewProducer()
	if err != nil {
		t.Fatal(err)
	}
	consumerSend(t, pr2, fresh, 8)

	commitErr := c.Commit() // the deleted partition's position 5
	c2 := e.NewConsumer("g", ReadCommitted)
	if err := c2.Assign(fresh); err != nil {
		t.Fatal(err)
	}
	if pos := c2.Position(fresh); pos != 0 {
		t.Errorf("Commit (err %v) of a deleted partition's position made the group resume the new topic %q at %d, want 0: records 0..%d of the new topic are skipped", commitErr, "t", pos, pos-1)
	}
}
