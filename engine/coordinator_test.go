package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/errcode"
	"github.com/idemlog/idemlog/producer"
)

func txnSend(t *testing.T, tp *TransactionalProducer, p *Partition, v byte) error {
	t.Helper()
	b := batch.NewBuilder(batch.CodecNone)
	b.Append(time.Now().UnixMilli(), nil, []byte{v}, nil)
	_, err := tp.Send(p, b)
	return err
}

func TestTransactionCommitAbortAcrossPartitions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	e.CreateTopic("out", 2)
	p0, _ := e.Partition("out", 0)
	p1, _ := e.Partition("out", 1)
	tp, err := e.NewTransactionalProducer("etl", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	_, epoch0 := tp.ID()
	for _, v := range []byte("ab") {
		if err := txnSend(t, tp, p0, v); err != nil {
			t.Fatal(err)
		}
		if err := txnSend(t, tp, p1, v); err != nil {
			t.Fatal(err)
		}
	}
	if p0.LastStableOffset() != 0 || string(readCommittedValues(t, p1)) != "" {
		t.Fatal("an open transaction is visible to read_committed")
	}
	if err := tp.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, epoch := tp.ID(); epoch != epoch0+1 {
		t.Fatalf("epoch %d after a commit, want %d (version 2 bumps)", epoch, epoch0+1)
	}
	for _, v := range []byte("xy") {
		if err := txnSend(t, tp, p0, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := txnSend(t, tp, p1, 'z'); err != nil {
		t.Fatal(err)
	}
	if err := tp.Abort(); err != nil {
		t.Fatal(err)
	}
	if err := txnSend(t, tp, p1, 'c'); err != nil {
		t.Fatal(err)
	}
	if err := tp.Commit(); err != nil {
		t.Fatal(err)
	}
	if got0, got1 := string(readCommittedValues(t, p0)), string(readCommittedValues(t, p1)); got0 != "ab" || got1 != "abc" {
		t.Fatalf("read_committed: %q and %q, want \"ab\" and \"abc\"", got0, got1)
	}
	// The state survives a restart.
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openEngine(t, dir, Options{})
	defer e.Close()
	c, err := e.coordinator()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, state, ok := c.State("etl"); !ok || state != TxnCompleteCommit {
		t.Fatalf("state after restart: %v %v", state, ok)
	}
}

func TestZombieFencing(t *testing.T) {
	t.Parallel()
	e := openEngine(t, t.TempDir(), Options{})
	defer e.Close()
	e.CreateTopic("out", 1)
	p, _ := e.Partition("out", 0)
	old, err := e.NewTransactionalProducer("app", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := txnSend(t, old, p, 'o'); err != nil {
		t.Fatal(err)
	}
	// A new instance fences the old one and aborts its open transaction.
	cur, err := e.NewTransactionalProducer("app", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	oldPID, oldEpoch := old.ID()
	pid, epoch := cur.ID()
	// The fence, the version-2 end's own bump (Kafka's), then
	// the new instance's.
	if pid != oldPID || epoch != oldEpoch+3 {
		t.Fatalf("new instance %d/%d, old %d/%d: want the same id, epoch +3 (fence, end, InitProducerID)", pid, epoch, oldPID, oldEpoch)
	}
	if err := txnSend(t, old, p, 'z'); !errors.Is(err, producer.ErrInvalidProducerEpoch) {
		t.Fatalf("zombie write: %v", err)
	}
	if err := old.Commit(); !errors.Is(err, ErrProducerFenced) || errcode.Code(err) != errcode.ProducerFenced {
		t.Fatalf("zombie commit: %v", err)
	}
	if err := txnSend(t, cur, p, 'n'); err != nil {
		t.Fatal(err)
	}
	if err := cur.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := string(readCommittedValues(t, p)); got != "n" {
		t.Fatalf("read_committed %q, want \"n\": the zombie's write must be aborted", got)
	}
}

func TestTransactionTimeoutFences(t *testing.T) {
	t.Parallel()
	now := time.Now()
	e := openEngine(t, t.TempDir(), Options{Now: func() time.Time { return now }})
	defer e.Close()
	e.CreateTopic("out", 1)
	p, _ := e.Partition("out", 0)
	tp, err := e.NewTransactionalProducer("slow", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := txnSend(t, tp, p, 's'); err != nil {
		t.Fatal(err)
	}
	c, _ := e.coordinator()
	if n, _ := c.AbortTimedOut(); n != 0 {
		t.Fatal("aborted a transaction before its timeout")
	}
	now = now.Add(2 * time.Second)
	if n, err := c.AbortTimedOut(); n != 1 || err != nil {
		t.Fatalf("timed-out aborts: %d %v", n, err)
	}
	if p.LastStableOffset() != p.log.HighWatermark() {
		t.Fatal("the timed-out transaction still pins the LSO")
	}
	if err := txnSend(t, tp, p, 't'); !errors.Is(err, producer.ErrInvalidProducerEpoch) {
		t.Fatalf("write after the timeout abort: %v", err)
	}
	if err := tp.Commit(); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("commit after the timeout abort: %v", err)
	}
}

func TestCrashDuringCommitCompletesOnRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	e.CreateTopic("out", 3)
	tp, err := e.NewTransactionalProducer("crashy", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var parts []*Partition
	for i := range 3 {
		p, _ := e.Partition("out", i)
		parts = append(parts, p)
		if err := txnSend(t, tp, p, byte('a'+i)); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := e.coordinator()
	c.stopAfterMarkers = 1 // the decision is durable, one marker written
	if err := tp.Commit(); !errors.Is(err, errCrashTest) {
		t.Fatalf("commit with a crash after one marker: %v", err)
	}
	if parts[0].LastStableOffset() != parts[0].log.HighWatermark() || parts[1].LastStableOffset() != 0 {
		t.Fatal("the crash happened at the wrong place")
	}
	e.kill()
	e = openEngine(t, dir, Options{})
	defer e.Close()
	c, err = e.coordinator()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, state, _ := c.State("crashy"); state != TxnCompleteCommit {
		t.Fatalf("state after recovery %v, want CompleteCommit", state)
	}
	for i := range 3 {
		p, _ := e.Partition("out", i)
		if got := string(readCommittedValues(t, p)); got != string(rune('a'+i)) {
			t.Fatalf("partition %d after recovery: %q", i, got)
		}
	}
}

func TestCoordinatorRequestErrors(t *testing.T) {
	t.Parallel()
	e := openEngine(t, t.TempDir(), Options{})
	defer e.Close()
	c, err := e.coordinator()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.InitProducerID("", time.Minute); !errors.Is(err, ErrInvalidRequest) || errcode.Code(err) != 42 {
		t.Fatalf("empty id: %v", err)
	}
	for _, d := range []time.Duration{0, -time.Second, MaxTransactionTimeout + time.Millisecond} {
		if _, _, err := c.InitProducerID("x", d); !errors.Is(err, ErrInvalidTransactionTimeout) || errcode.Code(err) != 50 {
			t.Fatalf("timeout %v: %v", d, err)
		}
	}
	pid, epoch, err := c.InitProducerID("x", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.EndTxn("x", pid+1, epoch, true); !errors.Is(err, ErrInvalidProducerIDMapping) || errcode.Code(err) != 49 {
		t.Fatalf("wrong producer id: %v", err)
	}
	if _, _, err := c.EndTxn("x", pid, epoch, true); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("commit with nothing open: %v", err)
	}
	// Version 1 flow: explicit AddPartitions, no epoch bump at the end.
	e.CreateTopic("v1", 1)
	if err := c.AddPartitions("x", pid, epoch, []TopicPartition{{"v1", 0}}, false); err != nil {
		t.Fatal(err)
	}
	p, _ := e.Partition("v1", 0)
	if _, err := p.Append(txnBatch(t, pid, epoch, 0, 1)); err != nil {
		t.Fatal(err)
	}
	gotPID, got, err := c.EndTxn("x", pid, epoch, true)
	if err != nil || gotPID != pid || got != epoch {
		t.Fatalf("version-1 commit: %d/%d, %v; want %d/%d", gotPID, got, err, pid, epoch)
	}
	if gotPID, got, err := c.EndTxn("x", pid, epoch, true); err != nil || gotPID != pid || got != epoch {
		t.Fatalf("retry of a finished commit: %d/%d %v", gotPID, got, err)
	}
	if _, _, err := c.EndTxn("x", pid, epoch, false); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("abort after commit: %v", err)
	}
}

func TestCrashBeforeDecisionAborts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	now := time.Now()
	opts := Options{Now: func() time.Time { return now }}
	e := openEngine(t, dir, opts)
	e.CreateTopic("out", 2)
	tp, err := e.NewTransactionalProducer("pre", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		p, _ := e.Partition("out", i)
		if err := txnSend(t, tp, p, 'u'); err != nil {
			t.Fatal(err)
		}
	}
	e.kill() // no decision was taken
	for _, how := range []string{"new instance", "timeout"} {
		e = openEngine(t, dir, opts)
		for i := range 2 {
			p, _ := e.Partition("out", i)
			if got := string(readCommittedValues(t, p)); got != "" {
				t.Fatalf("%s: undecided data visible after restart: %q", how, got)
			}
		}
		c, err := e.coordinator()
		if err != nil {
			t.Fatal(err)
		}
		if how == "new instance" {
			// The transaction is still Ongoing after the restart; the next
			// instance of the id aborts it. Then run a second transaction
			// to leave it open for the timeout case.
			if _, _, st, _ := c.State("pre"); st != TxnOngoing {
				t.Fatalf("state after restart %v, want Ongoing", st)
			}
			tp2, err := e.NewTransactionalProducer("pre", time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, st, _ := c.State("pre"); st != TxnEmpty {
				t.Fatalf("state after the new instance %v, want Empty", st)
			}
			p, _ := e.Partition("out", 0)
			if err := txnSend(t, tp2, p, 'v'); err != nil {
				t.Fatal(err)
			}
			e.kill()
			continue
		}
		now = now.Add(time.Minute)
		if n, err := c.AbortTimedOut(); n != 1 || err != nil {
			t.Fatalf("timeout after restart: %d %v", n, err)
		}
		for i := range 2 {
			p, _ := e.Partition("out", i)
			if p.LastStableOffset() != p.log.HighWatermark() || string(readCommittedValues(t, p)) != "" {
				t.Fatalf("partition %d: a hanging transaction survived its timeout", i)
			}
		}
		e.Close()
	}
}

// KIP-360: a producer re-initializing with the pair it last had.
func TestInitProducerIDExpected(t *testing.T) {
	t.Parallel()
	e := openEngine(t, t.TempDir(), Options{})
	defer e.Close()
	c, _ := e.coordinator()
	pid, epoch, err := c.InitProducerID("k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// Bump with the current pair: epoch+1.
	p2, e2, err := c.InitProducerIDExpected("k", time.Minute, pid, epoch)
	if err != nil || p2 != pid || e2 != epoch+1 {
		t.Fatalf("bump with the current pair: %d/%d %v", p2, e2, err)
	}
	// The same request again (the answer was lost): same result, no bump.
	p3, e3, err := c.InitProducerIDExpected("k", time.Minute, pid, epoch)
	if err != nil || p3 != pid || e3 != e2 {
		t.Fatalf("retry of the bump: %d/%d %v, want %d/%d", p3, e3, err, pid, e2)
	}
	// A stale pair is fenced.
	if _, _, err := c.InitProducerIDExpected("k", time.Minute, pid, epoch-1); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("stale epoch: %v", err)
	}
	if _, _, err := c.InitProducerIDExpected("k", time.Minute, pid+7, e2); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("other producer id: %v", err)
	}
	// At the exhausted epoch the id rotates to a new producer id, and a
	// retry from the old pair gets the same answer.
	c.mu.Lock()
	c.txns["k"].epoch = epochExhausted
	c.mu.Unlock()
	p4, e4, err := c.InitProducerIDExpected("k", time.Minute, pid, epochExhausted)
	if err != nil || p4 == pid || e4 != 0 {
		t.Fatalf("rotation: %d/%d %v", p4, e4, err)
	}
	p5, e5, err := c.InitProducerIDExpected("k", time.Minute, pid, epochExhausted)
	if err != nil || p5 != p4 || e5 != e4 {
		t.Fatalf("retry after rotation: %d/%d %v, want %d/%d", p5, e5, err, p4, e4)
	}
	// Once the new pair's transaction runs, a late retry from the old pair
	// is not answered with the pair in use: as any InitProducerID during a
	// transaction, it fences that instance (CONCURRENT_TRANSACTIONS, then
	// a new epoch). (Without this: it got p4/e4, a second live instance.)
	e.CreateTopic("kt", 1)
	if err := c.AddPartitions("k", p4, e4, []TopicPartition{{"kt", 0}}, false); err != nil {
		t.Fatal(err)
	}
	if gp, ge, err := c.InitProducerIDExpected("k", time.Minute, pid, epochExhausted); !errors.Is(err, ErrConcurrentTransactions) {
		t.Fatalf("late retry during the new pair's transaction: %d/%d %v, want CONCURRENT_TRANSACTIONS", gp, ge, err)
	}
	if _, ge, st, _ := c.State("k"); st != TxnCompleteAbort || ge <= e4 {
		t.Fatalf("after the fence: epoch %d state %v, want CompleteAbort above epoch %d", ge, st, e4)
	}
}

func TestTransactionalIDExpiry(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	now := time.Now()
	opts := Options{Now: func() time.Time { return now }, TransactionalIDExpiration: time.Hour}
	e := openEngine(t, dir, opts)
	e.CreateTopic("out", 1)
	p, _ := e.Partition("out", 0)
	idle, err := e.NewTransactionalProducer("idle", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	busy, err := e.NewTransactionalProducer("busy", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := txnSend(t, busy, p, 'b'); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Hour)
	c, _ := e.coordinator()
	if n, err := c.ExpireTransactionalIDs(); n != 1 || err != nil {
		t.Fatalf("expired %d, %v; want only the idle id (the busy one has a transaction open)", n, err)
	}
	if err := txnSend(t, idle, p, 'i'); !errors.Is(err, ErrInvalidProducerIDMapping) {
		t.Fatalf("write with an expired id: %v", err)
	}
	// The tombstone survives a restart.
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openEngine(t, dir, opts)
	defer e.Close()
	c, _ = e.coordinator()
	if _, _, _, ok := c.State("idle"); ok {
		t.Fatal("an expired id came back after a restart")
	}
	if _, _, st, ok := c.State("busy"); !ok || st != TxnOngoing {
		t.Fatalf("busy id after restart: %v %v", st, ok)
	}
}

// TestEndTxnStateTable is 3.5's table for transaction version 1: every
// state against COMMIT and ABORT.
func TestEndTxnStateTable(t *testing.T) {
	t.Parallel()
	e := openEngine(t, t.TempDir(), Options{})
	defer e.Close()
	c, _ := e.coordinator()
	pid, epoch, err := c.InitProducerID("table", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		state  TxnState
		commit bool
		want   error // nil: NONE
		after  TxnState
	}
	rows := []row{
		{TxnEmpty, true, ErrInvalidTxnState, TxnEmpty},
		{TxnEmpty, false, ErrInvalidTxnState, TxnEmpty},
		{TxnOngoing, true, nil, TxnCompleteCommit},
		{TxnOngoing, false, nil, TxnCompleteAbort},
		// A decided transaction found by a retry of its end has its
		// completion (markers, here none) written again meanwhile, as
		// Kafka's marker sender keeps doing; the answer is unchanged.
		{TxnPrepareCommit, true, ErrConcurrentTransactions, TxnCompleteCommit},
		{TxnPrepareCommit, false, ErrInvalidTxnState, TxnPrepareCommit},
		{TxnPrepareAbort, false, ErrConcurrentTransactions, TxnCompleteAbort},
		{TxnPrepareAbort, true, ErrInvalidTxnState, TxnPrepareAbort},
		{TxnCompleteCommit, true, nil, TxnCompleteCommit},
		{TxnCompleteCommit, false, ErrInvalidTxnState, TxnCompleteCommit},
		{TxnCompleteAbort, false, nil, TxnCompleteAbort},
		{TxnCompleteAbort, true, ErrInvalidTxnState, TxnCompleteAbort},
	}
	for _, r := range rows {
		c.mu.Lock()
		m := *c.txns["table"]
		m.state, m.epoch, m.partitions, m.tv2 = r.state, epoch, nil, false
		c.txns["table"] = &m
		c.mu.Unlock()
		gotPID, got, err := c.EndTxn("table", pid, epoch, r.commit)
		if r.want == nil && (err != nil || gotPID != pid || got != epoch) {
			t.Errorf("%v + commit=%v: %d/%d %v, want NONE at %d/%d", r.state, r.commit, gotPID, got, err, pid, epoch)
		}
		if r.want != nil && !errors.Is(err, r.want) {
			t.Errorf("%v + commit=%v: %v, want %v", r.state, r.commit, err, r.want)
		}
		if _, _, st, _ := c.State("table"); st != r.after {
			t.Errorf("%v + commit=%v: state %v after, want %v", r.state, r.commit, st, r.after)
		}
	}
	// Whatever the state, a wrong epoch is PRODUCER_FENCED, a wrong
	// producer id INVALID_PRODUCER_ID_MAPPING.
	if _, _, err := c.EndTxn("table", pid, epoch+1, true); !errors.Is(err, ErrProducerFenced) {
		t.Errorf("wrong epoch: %v", err)
	}
	if _, _, err := c.EndTxn("table", pid+1, epoch, true); !errors.Is(err, ErrInvalidProducerIDMapping) {
		t.Errorf("wrong producer id: %v", err)
	}
	if _, _, err := c.EndTxn("nobody", pid, epoch, true); !errors.Is(err, ErrInvalidProducerIDMapping) {
		t.Errorf("unknown id: %v", err)
	}
}

// TestOrphanSweep: partition transactions that no coordinator record
// covers (an unsynced Ongoing record lost in a machine crash, or a marker
// lost after the completion was recorded) are ended when the coordinator
// opens, so they cannot pin the last stable offset.
func TestOrphanSweep(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	e.CreateTopic("out", 2)
	p0, _ := e.Partition("out", 0)
	p1, _ := e.Partition("out", 1)
	c, err := e.coordinator()
	if err != nil {
		t.Fatal(err)
	}
	// Producer 900: transactional data, no coordinator record at all.
	if _, err := p0.Append(valueBatch(t, 900, 0, true, 'o')); err != nil {
		t.Fatal(err)
	}
	// Producer 901: its completion recorded as CompleteCommit at epoch 0
	// (version 1), but the marker never reached partition 1.
	if _, err := p1.Append(valueBatch(t, 901, 0, true, 'c')); err != nil {
		t.Fatal(err)
	}
	m := &txnMeta{id: "lost-marker", pid: 901, prevPID: -1, nextPID: -1, epoch: 0, lastEpoch: -1, timeout: time.Minute, state: TxnCompleteCommit, start: -1}
	c.mu.Lock()
	if err := c.persist(m, true); err != nil {
		t.Fatal(err)
	}
	c.mu.Unlock()
	if p0.LastStableOffset() != 0 || p1.LastStableOffset() != 0 {
		t.Fatal("setup: the orphans do not pin the LSO")
	}
	e.kill()
	e = openEngine(t, dir, Options{})
	defer e.Close()
	if _, err := e.coordinator(); err != nil {
		t.Fatal(err)
	}
	p0, _ = e.Partition("out", 0)
	p1, _ = e.Partition("out", 1)
	if p0.LastStableOffset() != p0.log.HighWatermark() || p1.LastStableOffset() != p1.log.HighWatermark() {
		t.Fatalf("orphans still pin the LSO: %d/%d, %d/%d", p0.LastStableOffset(), p0.log.HighWatermark(), p1.LastStableOffset(), p1.log.HighWatermark())
	}
	if got := string(readCommittedValues(t, p0)); got != "" {
		t.Fatalf("an unrecorded transaction was committed: %q", got)
	}
	if got := string(readCommittedValues(t, p1)); got != "c" {
		t.Fatalf("a transaction recorded committed was not: %q", got)
	}
}
