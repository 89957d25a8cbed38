package engine

import (
	"errors"
	"maps"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestAddPartitions: new partitions take the topic's configs and id, and
// keep them across a reopen; the count must rise; unknown and internal
// topics are refused.
func TestAddPartitions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	cfg := map[string]string{"retention.ms": "60000", "segment.bytes": "1048576"}
	if err := e.CreateTopic("t", 1, cfg); err != nil {
		t.Fatal(err)
	}
	id, _ := e.topicIDOf("t")
	if err := e.Frontend().AddPartitions("t", 3); err != nil {
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
		if err := e.Frontend().AddPartitions(c.topic, c.count); !errors.Is(err, c.want) {
			t.Errorf("AddPartitions(%s, %d) = %v, want %v", c.topic, c.count, err, c.want)
		}
	}
	if _, err := e.offsetGroups(); err != nil {
		t.Fatal(err)
	}
	if err := e.Frontend().AddPartitions(ConsumerOffsetsTopic, ConsumerOffsetsPartitions+1); !errors.Is(err, ErrInvalidTopic) {
		t.Errorf("AddPartitions(%s) = %v, want ErrInvalidTopic", ConsumerOffsetsTopic, err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	check(openEngine(t, dir, Options{}))
}

// waitPartitionLocked waits until n goroutines whose stacks hold fn are
// blocked on a mutex (the test holds e.mu).
func waitPartitionLocked(t *testing.T, n int, fns ...string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	buf := make([]byte, 1<<20)
	for {
		s := string(buf[:runtime.Stack(buf, true)])
		found := 0
		for _, g := range strings.Split(s, "\n\n") {
			if !strings.Contains(g, "SemacquireMutex") {
				continue
			}
			for _, fn := range fns {
				if strings.Contains(g, fn) {
					found++
					break
				}
			}
		}
		if found >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d goroutines blocked in %v:\n%s", found, n, fns, s)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestAddPartitionsResurrectsDeletedTopic: AddPartitions looks the
// topic up (and checks its count) before it takes e.mu. A DeleteTopic
// that completes in between is undone: createTopic, not told the topic
// must exist, makes every partition 0..count-1 anew under a new topic id.
// Kafka's CreatePartitions never creates a topic: a deleted one gets
// UNKNOWN_TOPIC_OR_PARTITION.
func TestAddPartitionsResurrectsDeletedTopic(t *testing.T) {
	t.Parallel()
	e := openEngine(t, t.TempDir(), Options{})
	defer e.Close()
	if err := e.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	delErr, addErr := make(chan error, 1), make(chan error, 1)
	go func() { delErr <- e.DeleteTopic("t") }()
	waitPartitionLocked(t, 1, "(*Engine).DeleteTopic")
	go func() { addErr <- e.Frontend().AddPartitions("t", 3) }()
	waitPartitionLocked(t, 2, "(*Engine).DeleteTopic", "Frontend.AddPartitions")
	e.mu.Unlock()
	if err := <-delErr; err != nil {
		t.Fatalf("DeleteTopic: %v", err)
	}
	aerr := <-addErr
	if n, ok := e.Topics()["t"]; ok {
		t.Fatalf("after DeleteTopic returned nil and AddPartitions(t, 3) returned %v, topic t exists with %d partitions (want it deleted; AddPartitions must answer ErrUnknownTopicOrPartition)", aerr, n)
	}
	if aerr != nil && !errors.Is(aerr, ErrUnknownTopicOrPartition) {
		t.Fatalf("AddPartitions: %v, want ErrUnknownTopicOrPartition", aerr)
	}
}

// TestAddPartitionsConcurrentSameCount: two AddPartitions(t, 3)
// of a 1-partition topic both succeed, because the count check runs
// before e.mu. Kafka applies CreatePartitions one at a time: the second
// finds 3 partitions and gets INVALID_PARTITIONS.
func TestAddPartitionsConcurrentSameCount(t *testing.T) {
	t.Parallel()
	e := openEngine(t, t.TempDir(), Options{})
	defer e.Close()
	if err := e.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- e.Frontend().AddPartitions("t", 3) }()
	}
	waitPartitionLocked(t, 2, "Frontend.AddPartitions")
	e.mu.Unlock()
	ok := 0
	for range 2 {
		err := <-errs
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, ErrInvalidPartitions):
			t.Fatalf("AddPartitions: %v", err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d of 2 concurrent AddPartitions(t, 3) succeeded, want exactly 1 (the other ErrInvalidPartitions)", ok)
	}
}
