package engine

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
)

// review21WaitLocked waits until n goroutines whose stacks hold fn are
// blocked on a mutex (the test holds e.mu).
func review21WaitLocked(t *testing.T, n int, fns ...string) {
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

// TestReview21AddPartitionsResurrectsDeletedTopic: AddPartitions looks the
// topic up (and checks its count) before it takes e.mu. A DeleteTopic
// that completes in between is undone: createTopic, not told the topic
// must exist, makes every partition 0..count-1 anew under a new topic id.
// Kafka's CreatePartitions never creates a topic: a deleted one gets
// UNKNOWN_TOPIC_OR_PARTITION.
func TestReview21AddPartitionsResurrectsDeletedTopic(t *testing.T) {
	e := openEngine(t, t.TempDir(), Options{})
	defer e.Close()
	if err := e.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	delErr, addErr := make(chan error, 1), make(chan error, 1)
	go func() { delErr <- e.DeleteTopic("t") }()
	review21WaitLocked(t, 1, "(*Engine).DeleteTopic")
	go func() { addErr <- e.AddPartitions("t", 3) }()
	review21WaitLocked(t, 2, "(*Engine).DeleteTopic", "(*Engine).AddPartitions")
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

// TestReview21AddPartitionsConcurrentSameCount: two AddPartitions(t, 3)
// of a 1-partition topic both succeed, because the count check runs
// before e.mu. Kafka applies CreatePartitions one at a time: the second
// finds 3 partitions and gets INVALID_PARTITIONS.
func TestReview21AddPartitionsConcurrentSameCount(t *testing.T) {
	e := openEngine(t, t.TempDir(), Options{})
	defer e.Close()
	if err := e.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- e.AddPartitions("t", 3) }()
	}
	review21WaitLocked(t, 2, "(*Engine).AddPartitions")
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
