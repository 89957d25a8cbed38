package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/idemlog/idemlog/partition"
)

var alwaysOptions = Options{Partition: partition.Options{Sync: partition.SyncPolicy{Kind: partition.SyncAlways}}}

// twoPartitions opens an engine with topic "t" of two partitions and a
// transactional producer "a".
func twoPartitions(t *testing.T, opts Options) (e *Engine, p0, p1 *Partition, a *TransactionalProducer) {
	t.Helper()
	e = openEngine(t, t.TempDir(), opts)
	t.Cleanup(func() { e.Close() })
	e.CreateTopic("t", 2)
	p0, _ = e.Partition("t", 0)
	p1, _ = e.Partition("t", 1)
	a, err := e.NewTransactionalProducer("a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return e, p0, p1, a
}

// TestDecisionSyncReleasesMutex: while a transaction's decision waits for
// its sync, the coordinator serves other transactional ids (their ends can
// share the sync), and the deciding id answers CONCURRENT_TRANSACTIONS
// without writing a marker (markers never precede a durable decision).
func TestDecisionSyncReleasesMutex(t *testing.T) {
	t.Parallel()
	e, p0, p1, a := twoPartitions(t, alwaysOptions)
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
	e.opts.private.decidingHook = func(id string) {
		if id != "a" || during.ran {
			return
		}
		during.ran = true
		during.p0hw = p0.log.HighWatermark()
		// The same id, mid-decision: a retry must not write markers.
		_, _, during.retry = c.endTxn("a", a.pid, a.epoch, true, true)
		// Another id ends while "a" waits: the mutex is free.
		during.other = b.Commit()
	}
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

// TestDecisionSyncFollowsPolicy: under SyncAlways every commit syncs its
// decision record before the markers (at least one sync of the
// __transaction_state log per commit, and the deciding hook sees no
// marker yet); under SyncNever no commit syncs that log, since nothing
// else of the transaction is synced there either (waitDecision).
func TestDecisionSyncFollowsPolicy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts Options
		sync bool
	}{{"never", Options{}, false}, {"always", alwaysOptions, true}} {
		t.Run(tc.name, func(t *testing.T) {
			e, p0, p1, tp := twoPartitions(t, tc.opts)
			c := tp.c
			state := c.log.log
			var syncsAtDecision []int64
			var markersAtDecision []int64
			e.opts.private.decidingHook = func(string) {
				syncsAtDecision = append(syncsAtDecision, state.Syncs())
				markersAtDecision = append(markersAtDecision, p0.log.HighWatermark()+p1.log.HighWatermark())
			}
			const commits = 5
			before := state.Syncs()
			for i := range commits {
				if err := txnSend(t, tp, p0, 'a'); err != nil {
					t.Fatal(err)
				}
				if err := txnSend(t, tp, p1, 'b'); err != nil {
					t.Fatal(err)
				}
				if err := tp.Commit(); err != nil {
					t.Fatal(err)
				}
				// The hook runs after the decision is appended and
				// before its sync and markers: this commit's two
				// batches are there, its markers are not.
				if want := int64(4*i + 2); markersAtDecision[i] != want {
					t.Fatalf("commit %d: %d offsets in the partitions at the decision, want %d (no marker before it)", i, markersAtDecision[i], want)
				}
				if i > 0 && tc.sync && syncsAtDecision[i] <= syncsAtDecision[i-1] {
					t.Fatalf("commit %d: no sync of the state log since the previous decision", i)
				}
			}
			synced := state.Syncs() - before
			if tc.sync && synced < commits {
				t.Errorf("%d syncs of the state log for %d commits under always, want >= %d", synced, commits, commits)
			}
			if !tc.sync && synced != 0 {
				t.Errorf("%d syncs of the state log for %d commits under never, want 0", synced, commits)
			}
			for _, p := range []*Partition{p0, p1} {
				if got := readCommittedValues(t, p); len(got) != commits {
					t.Errorf("%s-%d read_committed %q, want %d records", p.Topic(), p.Index(), got, commits)
				}
			}
		})
	}
}

// TestDecisionSyncFailureWritesNoMarker: when a decision's sync fails, the
// commit fails, no marker is written, and the id is back to Ongoing, not
// left PrepareCommit (where a retry would write the markers of a decision
// that may not be durable); a later commit decides again and succeeds.
func TestDecisionSyncFailureWritesNoMarker(t *testing.T) {
	t.Parallel()
	e, p0, p1, tp := twoPartitions(t, alwaysOptions)
	for _, p := range []*Partition{p0, p1} {
		if err := txnSend(t, tp, p, 'a'); err != nil {
			t.Fatal(err)
		}
	}
	errSync := errors.New("injected sync failure")
	e.opts.private.decisionSyncHook = func() error { return errSync }
	err := tp.Commit()
	e.opts.private.decisionSyncHook = nil
	if !errors.Is(err, errSync) {
		t.Fatalf("commit with a failing decision sync: %v", err)
	}
	c := tp.c
	c.mu.Lock()
	state := c.txns["a"].state
	c.mu.Unlock()
	if state != TxnOngoing {
		t.Fatalf("after a failed decision sync the id is %v, want Ongoing", state)
	}
	for _, p := range []*Partition{p0, p1} {
		if hw := p.log.HighWatermark(); hw != 1 {
			t.Fatalf("%s-%d holds %d offsets after a failed decision, want 1 (no marker)", p.Topic(), p.Index(), hw)
		}
	}
	if err := tp.Commit(); err != nil {
		t.Fatalf("commit after the failure: %v", err)
	}
	for _, p := range []*Partition{p0, p1} {
		if got := readCommittedValues(t, p); len(got) != 1 {
			t.Errorf("%s-%d read_committed %q, want the one record", p.Topic(), p.Index(), got)
		}
	}
}
