package engine

import (
	"testing"
)

// Deleting a topic deletes every group's committed offsets of it, as
// Kafka's group coordinator does: a topic created again under the name
// starts without them, before and after a restart. Other topics' offsets
// stay.
func TestDeleteTopicDeletesCommittedOffsets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	for _, topic := range []string{"t", "u"} {
		if err := e.CreateTopic(topic, 2); err != nil {
			t.Fatal(err)
		}
	}
	for _, g := range []string{"g1", "g2"} {
		if err := e.Frontend().CommitOffsets(g, map[TopicPartition]OffsetAndMetadata{
			{"t", 0}: {5, "a"}, {"t", 1}: {6, ""}, {"u", 0}: {7, "b"},
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.DeleteTopic("t"); err != nil {
		t.Fatal(err)
	}
	if err := e.CreateTopic("t", 2); err != nil {
		t.Fatal(err)
	}
	check := func(e *Engine, when string) {
		t.Helper()
		for _, g := range []string{"g1", "g2"} {
			got, err := e.fetchOffsets(g, nil, false)
			if err != nil {
				t.Fatal(err)
			}
			for tp, om := range got {
				if tp.Topic == "t" {
					t.Errorf("%s: group %s still has offset %d for %s-%d of the deleted topic", when, g, om.Offset, tp.Topic, tp.Partition)
				}
			}
			if om, ok := got[TopicPartition{"u", 0}]; !ok || om.Offset != 7 || om.Metadata != "b" {
				t.Errorf("%s: group %s's offset of u-0 is %+v (present %v), want 7 \"b\"", when, g, om, ok)
			}
		}
	}
	check(e, "after the deletion")
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openEngine(t, dir, Options{})
	check(e, "after a restart")
}

// A topic deleted where no offsets were ever committed does not create the
// internal offsets topic.
func TestDeleteTopicWithoutOffsetsStore(t *testing.T) {
	t.Parallel()
	e := openEngine(t, t.TempDir(), Options{})
	if err := e.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	if err := e.DeleteTopic("t"); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.Topics()[ConsumerOffsetsTopic]; ok {
		t.Fatalf("DeleteTopic created %s", ConsumerOffsetsTopic)
	}
}
