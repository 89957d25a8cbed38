package engine

import (
	"errors"
	"testing"
	"time"
)

// stallCreation makes e's creation of topic stop after its directories
// are durable, until the returned release is called; reached is closed
// when it stops there. Other topics' creations run through.
func stallCreation(t *testing.T, e *Engine, topic string) (reached <-chan struct{}, release func()) {
	t.Helper()
	at, gate := make(chan struct{}), make(chan struct{})
	e.opts.private.createTopicStepHook = func(tp, step string) {
		if tp == topic && step == "synced" {
			close(at)
			<-gate
		}
	}
	released := false
	release = func() {
		if !released {
			released = true
			close(gate)
		}
	}
	// Registered after openEngine's Close, so run before it: a failing
	// test does not leave Close waiting for the creation.
	t.Cleanup(release)
	return at, release
}

// TestCreationDoesNotHoldTopicLock: a creation of a wide topic held the
// engine's topic lock while it wrote and synced its files, seconds for
// thousands of partitions, so that every other creation, deletion and
// auto-creation (and the listener requests waiting on them) stalled
// behind it. With the creation stopped half way, the rest of the engine
// answers; creations of the same topic wait for it; its partitions count
// against MaxPartitions from the start, so that a concurrent creation
// cannot pass the limit with it.
func TestCreationDoesNotHoldTopicLock(t *testing.T) {
	e := openEngine(t, t.TempDir(), Options{MaxPartitions: 100})
	if err := e.CreateTopic("busy", 1); err != nil {
		t.Fatal(err)
	}
	reached, release := stallCreation(t, e, "wide")
	wideErr := make(chan error, 1)
	go func() { wideErr <- e.CreateTopic("wide", 64) }()
	select {
	case <-reached:
	case <-time.After(time.Minute):
		t.Fatal("the creation of wide did not reach its files' sync")
	}
	sameErr := make(chan error, 1)
	go func() { sameErr <- e.Frontend().CreateTopic("wide", 3, nil) }()

	done := make(chan error, 1)
	go func() {
		done <- func() error {
			p, err := e.Partition("busy", 0)
			if err != nil {
				return err
			}
			if _, err := p.Append(idem(t, -1, -1, -1, 1, 1)); err != nil {
				return err
			}
			if err := e.CreateTopic("other", 2); err != nil {
				return err
			}
			if err := e.Frontend().AddPartitions("busy", 2); err != nil {
				return err
			}
			topics := e.Topics()
			if topics["other"] != 2 || topics["busy"] != 2 || topics["wide"] != 0 {
				return errors.New("wrong topics while wide is being created")
			}
			// 1+1 (busy) + 2 (other) + 64 (wide, reserved) + 40 > 100.
			if err := e.CreateTopic("big", 40); !errors.Is(err, ErrResourceLimit) {
				return errors.New("a creation passed MaxPartitions beside wide's reserved partitions")
			}
			return e.DeleteTopic("other")
		}()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("other topics' operations waited for the creation of wide")
	}
	select {
	case err := <-sameErr:
		t.Fatalf("a creation of wide returned (%v) while another was in progress", err)
	case <-time.After(50 * time.Millisecond):
	}
	release()
	if err := <-wideErr; err != nil {
		t.Fatal(err)
	}
	if err := <-sameErr; !errors.Is(err, ErrTopicAlreadyExists) {
		t.Fatalf("the second creation of wide: %v, want ErrTopicAlreadyExists", err)
	}
	if got := e.Topics()["wide"]; got != 64 {
		t.Fatalf("wide has %d partitions, want 64", got)
	}
	if err := e.CreateTopic("big", 32); err != nil {
		t.Fatalf("a creation within MaxPartitions once wide is done: %v", err)
	}
}

// TestCloseWaitsForCreation: Close released the data dir's lock while a
// creation, which writes without the topic lock, was still writing in
// it. Close now waits; the creation, finding the engine closed, answers
// ErrClosed and leaves its durable partitions for the next Open.
func TestCloseWaitsForCreation(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	reached, release := stallCreation(t, e, "wide")
	wideErr := make(chan error, 1)
	go func() { wideErr <- e.CreateTopic("wide", 16) }()
	<-reached
	closeErr := make(chan error, 1)
	go func() { closeErr <- e.Close() }()
	select {
	case err := <-closeErr:
		t.Fatalf("Close returned (%v) during a creation", err)
	case <-time.After(100 * time.Millisecond):
	}
	release()
	if err := <-closeErr; err != nil {
		t.Fatal(err)
	}
	if err := <-wideErr; !errors.Is(err, ErrClosed) {
		t.Fatalf("the creation: %v, want ErrClosed", err)
	}
	e = openEngine(t, dir, Options{})
	if got := e.Topics()["wide"]; got != 16 {
		t.Fatalf("wide has %d partitions after reopening, want 16", got)
	}
}
