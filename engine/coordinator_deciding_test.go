package engine

import (
	"errors"
	"testing"
	"time"
)

// TestDecisionSyncReleasesMutex: while a transaction's decision waits for
// its sync, the coordinator serves other transactional ids (their ends can
// share the sync), and the deciding id answers CONCURRENT_TRANSACTIONS
// without writing a marker (markers never precede a durable decision).
func TestDecisionSyncReleasesMutex(t *testing.T) {
	e := openEngine(t, t.TempDir(), Options{})
	defer e.Close()
	e.CreateTopic("t", 2)
	p0, _ := e.Partition("t", 0)
	p1, _ := e.Partition("t", 1)
	a, err := e.NewTransactionalProducer("a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.NewTransactionalProducer("b", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := txnSend(t, a, p0, 'a'); err != nil {
		t.Fatal(err)
	}
	if err := txnSend(t, b, p1, 'b'); err != nil {
		t.Fatal(err)
	}
	c := a.c
	var during struct {
		retry, other error
		p0hw         int64
		ran          bool
	}
	decidingHook = func(id string) {
		if id != "a" || during.ran {
			return
		}
		during.ran = true
		during.p0hw = p0.Log().HighWatermark()
		// The same id, mid-decision: a retry must not write markers.
		_, _, during.retry = c.endTxn("a", a.pid, a.epoch, true, true)
		// Another id ends while "a" waits: the mutex is free.
		during.other = b.Commit()
	}
	defer func() { decidingHook = nil }()
	if err := a.Commit(); err != nil {
		t.Fatal(err)
	}
	if !during.ran {
		t.Fatal("hook never ran")
	}
	if !errors.Is(during.retry, ErrConcurrentTransactions) {
		t.Errorf("retry while deciding: %v, want CONCURRENT_TRANSACTIONS", during.retry)
	}
	if during.other != nil {
		t.Errorf("another id's commit while deciding: %v", during.other)
	}
	if during.p0hw != 1 {
		t.Errorf("partition 0 held %d offsets while deciding, want 1 (no marker yet)", during.p0hw)
	}
	for _, p := range []*Partition{p0, p1} {
		if got := string(readCommittedValues(t, p)); len(got) != 1 {
			t.Errorf("%s-%d read_committed %q, want the one committed record", p.Topic(), p.Index(), got)
		}
	}
}
