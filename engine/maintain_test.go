package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
)

// The engine enforces transaction timeouts itself: a transaction whose
// producer went quiet is aborted (its epoch bumped, so the producer is
// fenced) without the embedding program calling AbortTimedOut, and the
// last stable offset it pinned moves on.
func TestEngineMaintenanceAbortsTimedOutTransaction(t *testing.T) {
	t.Parallel()
	e := openEngine(t, t.TempDir(), Options{MaintainInterval: 20 * time.Millisecond})
	defer e.Close()
	if err := e.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	p := mustPartition(t, e, "t", 0)
	tp, err := e.NewTransactionalProducer("tx", 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	bld := batch.NewBuilder(batch.CodecNone)
	bld.Append(time.Now().UnixMilli(), nil, []byte("v"), nil)
	if _, err := tp.Send(p, bld); err != nil {
		t.Fatal(err)
	}
	if lso := p.LastStableOffset(); lso != 0 {
		t.Fatalf("LSO %d with the transaction open, want 0", lso)
	}
	deadline := time.Now().Add(10 * time.Second)
	for p.LastStableOffset() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the timed-out transaction still pins the LSO after 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := tp.Commit(); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("Commit after the timeout: %v, want the producer fenced", err)
	}
}
