package engine

import (
	"errors"
	"maps"
	"testing"
)

// TestAddPartitions: new partitions take the topic's configs and id, and
// keep them across a reopen; the count must rise; unknown and internal
// topics are refused.
func TestAddPartitions(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	cfg := map[string]string{"retention.ms": "60000", "segment.bytes": "1048576"}
	if err := e.CreateTopicWithConfig("t", 1, cfg); err != nil {
		t.Fatal(err)
	}
	id, _ := e.TopicID("t")
	if err := e.AddPartitions("t", 3); err != nil {
		t.Fatal(err)
	}
	check := func(e *Engine) {
		t.Helper()
		if n := e.Topics()["t"]; n != 3 {
			t.Fatalf("%d partitions, want 3", n)
		}
		for i := range 3 {
			p, err := e.Partition("t", i)
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(p.settings.Load().config, cfg) || p.topicID != id {
				t.Fatalf("partition %d: config %v id %x, want %v %x", i, p.settings.Load().config, p.topicID, cfg, id)
			}
		}
	}
	check(e)
	for _, c := range []struct {
		topic string
		count int
		want  error
	}{
		{"t", 3, ErrInvalidPartitions},
		{"t", 2, ErrInvalidPartitions},
		{"nope", 2, ErrUnknownTopicOrPartition},
	} {
		if err := e.AddPartitions(c.topic, c.count); !errors.Is(err, c.want) {
			t.Errorf("AddPartitions(%s, %d) = %v, want %v", c.topic, c.count, err, c.want)
		}
	}
	if _, err := e.OffsetGroups(); err != nil {
		t.Fatal(err)
	}
	if err := e.AddPartitions(ConsumerOffsetsTopic, ConsumerOffsetsPartitions+1); !errors.Is(err, ErrInvalidTopic) {
		t.Errorf("AddPartitions(%s) = %v, want ErrInvalidTopic", ConsumerOffsetsTopic, err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	check(openEngine(t, dir, Options{}))
}
