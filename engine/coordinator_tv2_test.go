package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/producer"
)

// Tests of 3.5's transaction-version-2 EndTxn: the epoch bump at every
// end, the producer id rotation at the exhausted epoch, the retry and
// empty-abort rules, and recovery of a rotating end.

// loggedBatch is a partition batch's header, as the tests inspect it.
type loggedBatch struct {
	offset  int64
	pid     int64
	epoch   int16
	seq     int32
	control bool
	commit  bool // a COMMIT marker
}

func logBatches(t *testing.T, p *Partition) []loggedBatch {
	t.Helper()
	var out []loggedBatch
	l := p.log
	for off := l.LogStartOffset(); off < l.HighWatermark(); {
		ch, err := l.Read(off, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		batches := batch.NewIter(ch.Data)
		for batches.Next() {
			b := batches.Batch()
			lb := loggedBatch{offset: b.BaseOffset(), pid: b.ProducerID(), epoch: b.ProducerEpoch(), seq: b.BaseSequence(), control: b.IsControl()}
			if lb.control {
				ctl, err := b.Control()
				if err != nil {
					t.Fatal(err)
				}
				lb.commit = ctl.Type == batch.ControlCommit
			}
			out = append(out, lb)
		}
		if err := batches.Err(); err != nil {
			t.Fatal(err)
		}
		off = ch.NextOffset
		ch.Release()
	}
	return out
}

func markers(bs []loggedBatch) []loggedBatch {
	var out []loggedBatch
	for _, b := range bs {
		if b.control {
			out = append(out, b)
		}
	}
	return out
}

// meta returns a copy of the id's metadata.
func meta(t *testing.T, c *Coordinator, id string) txnMeta {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.txns[id]
	if m == nil {
		t.Fatalf("no metadata for %q", id)
	}
	return *m
}

// exhaust sets the id's stored epoch, and the producer's, to the
// exhausted epoch (as TestInitProducerIDExpected does), without the 32766
// transactions it takes to get there.
func exhaust(t *testing.T, c *Coordinator, tp *TransactionalProducer) {
	t.Helper()
	c.mu.Lock()
	m := *c.txns[tp.id]
	m.epoch = epochExhausted
	c.txns[tp.id] = &m
	c.mu.Unlock()
	tp.epoch = epochExhausted
}

// TestEndTxnV2EpochRotation: an end at the exhausted epoch allocates the
// next producer id with the decision; its markers carry the old id at the
// exhausted epoch + 1; on completion the id moves to (next id, 0), which
// EndTxn returns and the producer adopts. The next transaction writes
// with (next id, 0, sequence 0); the old id is fenced; a retry of the end
// from (old id, exhausted epoch) gets the same answer and writes nothing.
func TestEndTxnV2EpochRotation(t *testing.T) {
	t.Parallel()
	for _, commit := range []bool{true, false} {
		name := map[bool]string{true: "commit", false: "abort"}[commit]
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			e := openEngine(t, dir, Options{})
			e.CreateTopic("out", 2)
			p0, _ := e.Partition("out", 0)
			p1, _ := e.Partition("out", 1)
			c, _ := e.coordinator()
			tp, err := e.NewTransactionalProducer("rot", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			oldPID, _ := tp.ID()
			exhaust(t, c, tp)
			for _, p := range []*Partition{p0, p1} {
				for _, v := range []byte("ab") {
					if err := txnSend(t, tp, p, v); err != nil {
						t.Fatal(err)
					}
				}
			}
			end := tp.Commit
			if !commit {
				end = tp.Abort
			}
			if err := end(); err != nil {
				t.Fatal(err)
			}
			newPID, newEpoch := tp.ID()
			if newPID == oldPID || newPID < 0 || newEpoch != 0 {
				t.Fatalf("producer after the end at the exhausted epoch: %d/%d, want a new id at epoch 0 (old %d)", newPID, newEpoch, oldPID)
			}
			m := meta(t, c, "rot")
			wantState := map[bool]TxnState{true: TxnCompleteCommit, false: TxnCompleteAbort}[commit]
			if m.pid != newPID || m.epoch != 0 || m.prevPID != oldPID || m.nextPID != -1 || m.state != wantState || m.lastEpoch != epochExhausted {
				t.Fatalf("metadata %+v, want %v at %d/0, previous %d, last epoch %d", m, wantState, newPID, oldPID, epochExhausted)
			}
			for i, p := range []*Partition{p0, p1} {
				ms := markers(logBatches(t, p))
				if len(ms) != 1 || ms[0].pid != oldPID || ms[0].epoch != math.MaxInt16 || ms[0].commit != commit {
					t.Fatalf("partition %d markers %+v, want one commit=%v for %d at epoch %d", i, ms, commit, oldPID, math.MaxInt16)
				}
				want := map[bool]string{true: "ab", false: ""}[commit]
				if got := string(readCommittedValues(t, p)); got != want {
					t.Fatalf("partition %d read_committed %q, want %q", i, got, want)
				}
			}

			// A retry from the old pair: the same answer, no markers.
			hw0, hw1, hwState := p0.log.HighWatermark(), p1.log.HighWatermark(), c.log.log.HighWatermark()
			pid, epoch, err := c.endTxn("rot", oldPID, epochExhausted, commit, true)
			if err != nil || pid != newPID || epoch != 0 {
				t.Fatalf("retry from the old pair: %d/%d %v, want %d/0", pid, epoch, err, newPID)
			}
			// The exported form (version from the stored state) too.
			if pid, epoch, err := c.EndTxn("rot", oldPID, epochExhausted, commit); err != nil || pid != newPID || epoch != 0 {
				t.Fatalf("EndTxn retry from the old pair: %d/%d %v", pid, epoch, err)
			}
			// The other end at the retry epoch: INVALID_TXN_STATE after a
			// commit; PRODUCER_FENCED after an abort (3.6).
			wantOther := map[bool]error{true: ErrInvalidTxnState, false: ErrProducerFenced}[commit]
			if _, _, err := c.endTxn("rot", oldPID, epochExhausted, !commit, true); !errors.Is(err, wantOther) {
				t.Fatalf("opposite end from the old pair: %v, want %v", err, wantOther)
			}
			if p0.log.HighWatermark() != hw0 || p1.log.HighWatermark() != hw1 || c.log.log.HighWatermark() != hwState {
				t.Fatal("a retry wrote markers or a state record")
			}

			// The old producer id is fenced.
			if _, err := p0.Append(txnBatch(t, oldPID, epochExhausted, 2, 1)); !errors.Is(err, producer.ErrInvalidProducerEpoch) {
				t.Fatalf("data from the old pair: %v", err)
			}
			if err := c.AddPartitions("rot", oldPID, epochExhausted, []TopicPartition{{"out", 0}}, true); !errors.Is(err, ErrInvalidProducerIDMapping) {
				t.Fatalf("AddPartitions from the old pair: %v", err)
			}

			// The next transaction: (new id, 0), sequences from 0.
			before := len(logBatches(t, p0))
			if err := txnSend(t, tp, p0, 'n'); err != nil {
				t.Fatal(err)
			}
			if err := txnSend(t, tp, p0, 'm'); err != nil {
				t.Fatal(err)
			}
			bs := logBatches(t, p0)[before:]
			if len(bs) != 2 || bs[0].pid != newPID || bs[0].epoch != 0 || bs[0].seq != 0 || bs[1].seq != 1 {
				t.Fatalf("next transaction's batches %+v, want %d/0 at sequences 0, 1", bs, newPID)
			}
			if err := tp.Commit(); err != nil {
				t.Fatal(err)
			}
			if pid, epoch := tp.ID(); pid != newPID || epoch != 1 {
				t.Fatalf("after the next commit %d/%d, want %d/1", pid, epoch, newPID)
			}
			if ms := markers(logBatches(t, p0)); ms[len(ms)-1].pid != newPID || ms[len(ms)-1].epoch != 1 {
				t.Fatalf("next transaction's marker %+v", ms[len(ms)-1])
			}
			want := map[bool]string{true: "abnm", false: "nm"}[commit]
			if got := string(readCommittedValues(t, p0)); got != want {
				t.Fatalf("read_committed %q, want %q", got, want)
			}
			// Once the new id has moved on, the old pair is no retry.
			if _, _, err := c.endTxn("rot", oldPID, epochExhausted, commit, true); !errors.Is(err, ErrInvalidProducerIDMapping) {
				t.Fatalf("old pair after the next transaction: %v", err)
			}

			// The rotation survives a restart.
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			e = openEngine(t, dir, Options{})
			defer e.Close()
			c, err = e.coordinator()
			if err != nil {
				t.Fatal(err)
			}
			if pid, epoch, st, _ := c.State("rot"); pid != newPID || epoch != 1 || st != TxnCompleteCommit {
				t.Fatalf("after restart %d/%d %v, want %d/1 CompleteCommit", pid, epoch, st, newPID)
			}
		})
	}
}

// TestEndTxnV2StateTable is 3.5's version-2 table: every state against
// COMMIT and ABORT at the current epoch, a retry epoch (one below) and
// others, with the answer, the state and epoch after, and how many
// transaction-state records the request wrote.
func TestEndTxnV2StateTable(t *testing.T) {
	t.Parallel()
	e := openEngine(t, t.TempDir(), Options{})
	defer e.Close()
	c, _ := e.coordinator()
	pid, _, err := c.InitProducerID("v2", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	const E = 5 // the stored epoch
	const (
		cur   = E
		retry = E - 1
		stale = E - 2
		ahead = E + 1
	)
	type row struct {
		state   TxnState
		epoch   int16 // the request's
		commit  bool
		want    error // nil: NONE
		after   TxnState
		epochTo int16 // the stored epoch after, also the answer with NONE
		writes  int64
	}
	rows := []row{
		// Empty: the current epoch only; ABORT is an empty abort.
		{TxnEmpty, cur, false, nil, TxnCompleteAbort, E + 1, 2},
		{TxnEmpty, cur, true, ErrInvalidTxnState, TxnEmpty, E, 0},
		{TxnEmpty, retry, false, ErrProducerFenced, TxnEmpty, E, 0},
		{TxnEmpty, retry, true, ErrProducerFenced, TxnEmpty, E, 0},
		{TxnEmpty, ahead, false, ErrProducerFenced, TxnEmpty, E, 0},
		// Ongoing: the current epoch only; the end bumps it.
		{TxnOngoing, cur, true, nil, TxnCompleteCommit, E + 1, 2},
		{TxnOngoing, cur, false, nil, TxnCompleteAbort, E + 1, 2},
		{TxnOngoing, retry, true, ErrProducerFenced, TxnOngoing, E, 0},
		{TxnOngoing, retry, false, ErrProducerFenced, TxnOngoing, E, 0},
		{TxnOngoing, ahead, true, ErrProducerFenced, TxnOngoing, E, 0},
		// PrepareX: a retry only. The same end is
		// CONCURRENT_TRANSACTIONS (its completion is driven, here with no
		// markers to write); the other INVALID_TXN_STATE.
		{TxnPrepareCommit, retry, true, ErrConcurrentTransactions, TxnCompleteCommit, E, 1},
		{TxnPrepareCommit, retry, false, ErrInvalidTxnState, TxnPrepareCommit, E, 0},
		{TxnPrepareCommit, cur, true, ErrProducerFenced, TxnPrepareCommit, E, 0},
		{TxnPrepareCommit, stale, true, ErrProducerFenced, TxnPrepareCommit, E, 0},
		{TxnPrepareAbort, retry, false, ErrConcurrentTransactions, TxnCompleteAbort, E, 1},
		{TxnPrepareAbort, retry, true, ErrInvalidTxnState, TxnPrepareAbort, E, 0},
		{TxnPrepareAbort, cur, false, ErrProducerFenced, TxnPrepareAbort, E, 0},
		// CompleteCommit: a retry of the COMMIT is NONE; a COMMIT at the
		// current epoch INVALID_TXN_STATE; an ABORT at the current epoch
		// an empty abort; an ABORT at the retry epoch INVALID_TXN_STATE.
		{TxnCompleteCommit, retry, true, nil, TxnCompleteCommit, E, 0},
		{TxnCompleteCommit, cur, true, ErrInvalidTxnState, TxnCompleteCommit, E, 0},
		{TxnCompleteCommit, retry, false, ErrInvalidTxnState, TxnCompleteCommit, E, 0},
		{TxnCompleteCommit, cur, false, nil, TxnCompleteAbort, E + 1, 2},
		{TxnCompleteCommit, stale, true, ErrProducerFenced, TxnCompleteCommit, E, 0},
		{TxnCompleteCommit, ahead, false, ErrProducerFenced, TxnCompleteCommit, E, 0},
		// CompleteAbort: a retry of the ABORT is NONE; an ABORT at the
		// current epoch an empty abort; a COMMIT at the retry epoch lost
		// to the coordinator's own abort (a timeout): PRODUCER_FENCED; at
		// the current epoch INVALID_TXN_STATE.
		{TxnCompleteAbort, retry, false, nil, TxnCompleteAbort, E, 0},
		{TxnCompleteAbort, cur, false, nil, TxnCompleteAbort, E + 1, 2},
		{TxnCompleteAbort, retry, true, ErrProducerFenced, TxnCompleteAbort, E, 0},
		{TxnCompleteAbort, cur, true, ErrInvalidTxnState, TxnCompleteAbort, E, 0},
		{TxnCompleteAbort, stale, false, ErrProducerFenced, TxnCompleteAbort, E, 0},
	}
	for _, r := range rows {
		c.mu.Lock()
		m := *c.txns["v2"]
		m.state, m.epoch, m.lastEpoch, m.partitions, m.tv2, m.nextPID = r.state, E, -1, nil, true, -1
		if r.state == TxnPrepareCommit || r.state == TxnPrepareAbort {
			m.lastEpoch = E - 1 // the client's own end (a fence leaves -1)
		}
		c.txns["v2"] = &m
		c.mu.Unlock()
		hw := c.log.log.HighWatermark()
		gotPID, got, err := c.endTxn("v2", pid, r.epoch, r.commit, true)
		if r.want == nil && (err != nil || gotPID != pid || got != r.epochTo) {
			t.Errorf("%v, epoch %d, commit=%v: %d/%d %v, want NONE at %d/%d", r.state, r.epoch, r.commit, gotPID, got, err, pid, r.epochTo)
		}
		if r.want != nil && !errors.Is(err, r.want) {
			t.Errorf("%v, epoch %d, commit=%v: %v, want %v", r.state, r.epoch, r.commit, err, r.want)
		}
		after := meta(t, c, "v2")
		if after.state != r.after || after.epoch != r.epochTo || after.pid != pid {
			t.Errorf("%v, epoch %d, commit=%v: %v at %d/%d after, want %v at %d/%d", r.state, r.epoch, r.commit, after.state, after.pid, after.epoch, r.after, pid, r.epochTo)
		}
		if n := c.log.log.HighWatermark() - hw; n != r.writes {
			t.Errorf("%v, epoch %d, commit=%v: %d state records written, want %d", r.state, r.epoch, r.commit, n, r.writes)
		}
	}
	// PrepareAbort reached by the coordinator's own fence (lastEpoch -1):
	// the producer's COMMIT at the epoch below is fenced, as it is once
	// that abort completes, not INVALID_TXN_STATE.
	c.mu.Lock()
	fm := *c.txns["v2"]
	fm.state, fm.epoch, fm.lastEpoch, fm.partitions, fm.tv2, fm.nextPID = TxnPrepareAbort, E, -1, nil, true, -1
	c.txns["v2"] = &fm
	c.mu.Unlock()
	if _, _, err := c.endTxn("v2", pid, E-1, true, true); !errors.Is(err, ErrProducerFenced) {
		t.Errorf("commit during a fence's PrepareAbort: %v, want PRODUCER_FENCED", err)
	}
	// A wrong producer id is INVALID_PRODUCER_ID_MAPPING whatever the
	// epoch, as is an unknown transactional id.
	if _, _, err := c.endTxn("v2", pid+1, E, false, true); !errors.Is(err, ErrInvalidProducerIDMapping) {
		t.Errorf("wrong producer id: %v", err)
	}
	if _, _, err := c.endTxn("nobody", pid, E, false, true); !errors.Is(err, ErrInvalidProducerIDMapping) {
		t.Errorf("unknown id: %v", err)
	}
	// MaxInt16 is never handed out (3.2): a retry that would answer it
	// (only a version-1 fence at the exhausted epoch leaves it) is fenced.
	c.mu.Lock()
	m := *c.txns["v2"]
	m.state, m.epoch, m.lastEpoch, m.tv2 = TxnCompleteAbort, math.MaxInt16, -1, false
	c.txns["v2"] = &m
	c.mu.Unlock()
	if _, _, err := c.endTxn("v2", pid, epochExhausted, false, true); !errors.Is(err, ErrProducerFenced) {
		t.Errorf("retry answering epoch %d: %v", math.MaxInt16, err)
	}
}

// TestEndTxnV2EmptyAbort: an ABORT with no transaction open (Empty,
// CompleteCommit, CompleteAbort) at the current epoch bumps the epoch
// through PrepareAbort and CompleteAbort and writes no markers; a COMMIT
// with none open is INVALID_TXN_STATE. At the exhausted epoch an empty
// abort rotates the producer id like any end.
func TestEndTxnV2EmptyAbort(t *testing.T) {
	t.Parallel()
	e := openEngine(t, t.TempDir(), Options{})
	defer e.Close()
	e.CreateTopic("out", 1)
	p, _ := e.Partition("out", 0)
	c, _ := e.coordinator()
	tp, err := e.NewTransactionalProducer("empty", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	pid, epoch := tp.ID()
	// Empty.
	if err := tp.Abort(); err != nil {
		t.Fatalf("abort with nothing open: %v", err)
	}
	if gp, ge := tp.ID(); gp != pid || ge != epoch+1 {
		t.Fatalf("after an empty abort in Empty %d/%d, want %d/%d", gp, ge, pid, epoch+1)
	}
	if _, _, st, _ := c.State("empty"); st != TxnCompleteAbort {
		t.Fatalf("state %v, want CompleteAbort", st)
	}
	// A transaction, then empty aborts from CompleteCommit and
	// CompleteAbort: no markers.
	if err := txnSend(t, tp, p, 'a'); err != nil {
		t.Fatal(err)
	}
	if err := tp.Commit(); err != nil {
		t.Fatal(err)
	}
	hw := p.log.HighWatermark()
	for i, want := range []int16{epoch + 3, epoch + 4} {
		if err := tp.Abort(); err != nil {
			t.Fatalf("empty abort %d: %v", i, err)
		}
		if gp, ge := tp.ID(); gp != pid || ge != want {
			t.Fatalf("after empty abort %d: %d/%d, want %d/%d", i, gp, ge, pid, want)
		}
	}
	if p.log.HighWatermark() != hw {
		t.Fatal("an empty abort wrote a marker")
	}
	// COMMIT with nothing open: the coordinator answers INVALID_TXN_STATE
	// and nothing changes; the producer handle does not even ask (an empty
	// transaction commits trivially, as in Kafka's client).
	if _, _, err := tp.c.endTxn(tp.id, tp.pid, tp.epoch, true, true); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("coordinator commit with nothing open: %v", err)
	}
	if err := tp.Commit(); err != nil {
		t.Fatalf("producer commit with nothing written: %v", err)
	}
	if gp, ge := tp.ID(); gp != pid || ge != epoch+4 {
		t.Fatalf("a commit of nothing moved the producer to %d/%d", gp, ge)
	}
	// The next transaction writes at the new epoch from sequence 0.
	if err := txnSend(t, tp, p, 'b'); err != nil {
		t.Fatal(err)
	}
	if bs := logBatches(t, p); bs[len(bs)-1].epoch != epoch+4 || bs[len(bs)-1].seq != 0 {
		t.Fatalf("batch after empty aborts %+v, want epoch %d sequence 0", bs[len(bs)-1], epoch+4)
	}
	if err := tp.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := string(readCommittedValues(t, p)); got != "ab" {
		t.Fatalf("read_committed %q, want \"ab\"", got)
	}
	// At the exhausted epoch.
	exhaust(t, c, tp)
	hw = p.log.HighWatermark()
	if err := tp.Abort(); err != nil {
		t.Fatal(err)
	}
	if gp, ge := tp.ID(); gp == pid || ge != 0 {
		t.Fatalf("empty abort at the exhausted epoch: %d/%d, want a new id at 0", gp, ge)
	}
	if p.log.HighWatermark() != hw {
		t.Fatal("an empty abort wrote a marker")
	}
}

// TestEndTxnV2PrepareRetry: a decision whose markers were not all written
// (the write failed) is PrepareX at the bumped epoch. Only a retry is
// accepted there: the same end answers CONCURRENT_TRANSACTIONS after
// writing the missing markers, and its next retry NONE; the other end is
// INVALID_TXN_STATE; the bumped epoch itself is fenced. Commit retries
// through this.
func TestEndTxnV2PrepareRetry(t *testing.T) {
	t.Parallel()
	e := openEngine(t, t.TempDir(), Options{})
	defer e.Close()
	e.CreateTopic("out", 2)
	p0, _ := e.Partition("out", 0)
	p1, _ := e.Partition("out", 1)
	c, _ := e.coordinator()
	tp, err := e.NewTransactionalProducer("prep", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	pid, epoch := tp.ID()
	for i, p := range []*Partition{p0, p1} {
		if err := txnSend(t, tp, p, byte('a'+i)); err != nil {
			t.Fatal(err)
		}
	}
	c.stopAfterMarkers = 1
	if err := tp.Commit(); !errors.Is(err, errCrashTest) {
		t.Fatalf("commit stopped after one marker: %v", err)
	}
	if gp, ge := tp.ID(); gp != pid || ge != epoch {
		t.Fatalf("a failed commit moved the producer to %d/%d", gp, ge)
	}
	if m := meta(t, c, "prep"); m.state != TxnPrepareCommit || m.epoch != epoch+1 {
		t.Fatalf("after the failed commit: %v at %d", m.state, m.epoch)
	}
	if _, _, err := c.endTxn("prep", pid, epoch+1, true, true); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("the bumped epoch in PrepareCommit: %v", err)
	}
	if _, _, err := c.endTxn("prep", pid, epoch, false, true); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("ABORT retry in PrepareCommit: %v", err)
	}
	// Still failing: CONCURRENT_TRANSACTIONS, still PrepareCommit.
	if _, _, err := c.endTxn("prep", pid, epoch, true, true); !errors.Is(err, ErrConcurrentTransactions) {
		t.Fatalf("COMMIT retry in PrepareCommit: %v", err)
	}
	if m := meta(t, c, "prep"); m.state != TxnPrepareCommit {
		t.Fatalf("state %v after a failed completion", m.state)
	}
	if string(readCommittedValues(t, p1)) != "" {
		t.Fatal("partition 1 committed early")
	}
	// Writable again: the producer's Commit completes and answers NONE.
	c.stopAfterMarkers = 0
	if err := tp.Commit(); err != nil {
		t.Fatalf("commit retry: %v", err)
	}
	if gp, ge := tp.ID(); gp != pid || ge != epoch+1 {
		t.Fatalf("after the commit retry %d/%d, want %d/%d", gp, ge, pid, epoch+1)
	}
	if got0, got1 := string(readCommittedValues(t, p0)), string(readCommittedValues(t, p1)); got0 != "a" || got1 != "b" {
		t.Fatalf("read_committed %q %q, want \"a\" \"b\"", got0, got1)
	}
	if ms := markers(logBatches(t, p1)); len(ms) != 1 || !ms[0].commit || ms[0].epoch != epoch+1 {
		t.Fatalf("partition 1 markers %+v", ms)
	}
}

// TestEndTxnV2RotationCrashRecovery: the machine stops between the
// decision of a rotating end (PrepareCommit with the next producer id,
// durable) and its completion, one marker written. Recovery writes the
// rest and ends at (next id, 0); the producer's retry of the end gets
// that pair; the id's next transaction uses it; and the allocator never
// hands the next id out again.
func TestEndTxnV2RotationCrashRecovery(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	e.CreateTopic("out", 3)
	c, _ := e.coordinator()
	tp, err := e.NewTransactionalProducer("crashrot", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	oldPID, _ := tp.ID()
	exhaust(t, c, tp)
	for i := range 3 {
		p, _ := e.Partition("out", i)
		if err := txnSend(t, tp, p, byte('a'+i)); err != nil {
			t.Fatal(err)
		}
	}
	c.stopAfterMarkers = 1
	if err := tp.Commit(); !errors.Is(err, errCrashTest) {
		t.Fatalf("commit with a crash after one marker: %v", err)
	}
	m := meta(t, c, "crashrot")
	if m.state != TxnPrepareCommit || m.pid != oldPID || m.epoch != math.MaxInt16 || m.nextPID < 0 || m.nextPID == oldPID {
		t.Fatalf("decision %+v, want PrepareCommit at %d/%d with a next producer id", m, oldPID, math.MaxInt16)
	}
	nextPID := m.nextPID
	e.kill()

	e = openEngine(t, dir, Options{})
	defer e.Close()
	c, err = e.coordinator()
	if err != nil {
		t.Fatal(err)
	}
	m = meta(t, c, "crashrot")
	if m.state != TxnCompleteCommit || m.pid != nextPID || m.epoch != 0 || m.prevPID != oldPID || m.nextPID != -1 {
		t.Fatalf("after recovery %+v, want CompleteCommit at %d/0, previous %d", m, nextPID, oldPID)
	}
	for i := range 3 {
		p, _ := e.Partition("out", i)
		if got := string(readCommittedValues(t, p)); got != string(rune('a'+i)) {
			t.Fatalf("partition %d after recovery: %q", i, got)
		}
		for _, mk := range markers(logBatches(t, p)) {
			if mk.pid != oldPID || mk.epoch != math.MaxInt16 || !mk.commit {
				t.Fatalf("partition %d marker %+v", i, mk)
			}
		}
	}
	// The producer's retry after the restart.
	pid, epoch, err := c.EndTxn("crashrot", oldPID, epochExhausted, true)
	if err != nil || pid != nextPID || epoch != 0 {
		t.Fatalf("retry after recovery: %d/%d %v, want %d/0", pid, epoch, err, nextPID)
	}
	// The next transaction with the new pair.
	if err := c.AddPartitions("crashrot", nextPID, 0, []TopicPartition{{"out", 0}}, true); err != nil {
		t.Fatal(err)
	}
	p0, _ := e.Partition("out", 0)
	if _, err := p0.Append(txnBatch(t, nextPID, 0, 0, 1)); err != nil {
		t.Fatal(err)
	}
	if pid, epoch, err := c.EndTxn("crashrot", nextPID, 0, true); err != nil || pid != nextPID || epoch != 1 {
		t.Fatalf("next commit: %d/%d %v", pid, epoch, err)
	}
	if got := string(readCommittedValues(t, p0)); got != "a\x00" {
		t.Fatalf("read_committed %q", got)
	}
	other, _, err := c.InitProducerID("other", time.Minute)
	if err != nil || other == nextPID || other == oldPID {
		t.Fatalf("a later producer id %d (%v) reuses %d or %d", other, err, nextPID, oldPID)
	}
}

// TestTimeoutAtExhaustedEpochRotates: the coordinator's abort of a timed
// out version-2 transaction at the exhausted epoch rotates the producer id
// too (Kafka's KAFKA-20090), so that MaxInt16 is never handed out. The
// timed-out producer is fenced, COMMIT and ABORT alike (3.6); a new
// instance goes on at the new id. (With a single bump its ABORT would pass for
// the retry of the rotating end and take the new pair: un-fenced.)
func TestTimeoutAtExhaustedEpochRotates(t *testing.T) {
	t.Parallel()
	now := time.Now()
	e := openEngine(t, t.TempDir(), Options{Now: func() time.Time { return now }})
	defer e.Close()
	e.CreateTopic("out", 1)
	p, _ := e.Partition("out", 0)
	c, _ := e.coordinator()
	tp, err := e.NewTransactionalProducer("slow", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	oldPID, _ := tp.ID()
	exhaust(t, c, tp)
	if err := txnSend(t, tp, p, 's'); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Second)
	if n, err := c.AbortTimedOut(); n != 1 || err != nil {
		t.Fatalf("timed-out aborts: %d %v", n, err)
	}
	m := meta(t, c, "slow")
	if m.state != TxnCompleteAbort || m.pid == oldPID || m.epoch != 0 || m.prevPID != oldPID {
		t.Fatalf("after the timeout %+v, want CompleteAbort at a new id, epoch 0", m)
	}
	if ms := markers(logBatches(t, p)); len(ms) != 1 || ms[0].commit || ms[0].pid != oldPID || ms[0].epoch != math.MaxInt16 {
		t.Fatalf("markers %+v", ms)
	}
	if err := tp.Commit(); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("commit after the timeout abort: %v", err)
	}
	if err := tp.Abort(); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("abort after the timeout abort: %v, want fenced", err)
	}
	tp, err = e.NewTransactionalProducer("slow", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if pid, _ := tp.ID(); pid != m.pid {
		t.Fatalf("new instance at %d, want the rotated id %d", pid, m.pid)
	}
	if err := txnSend(t, tp, p, 't'); err != nil {
		t.Fatal(err)
	}
	if err := tp.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := string(readCommittedValues(t, p)); got != "t" {
		t.Fatalf("read_committed %q, want \"t\"", got)
	}
}

// TestTimeoutAbortThenProducerAbort: below the exhausted epoch, the
// producer whose transaction timed out gets PRODUCER_FENCED for COMMIT and
// ABORT alike (3.6): Kafka's version-2 fence bumps the epoch twice (the
// fence, then the end's own bump), so the producer's end is no retry of
// the coordinator's. A new instance goes on. (With a single bump
// its ABORT would pass as a retry and un-fence it; TestCrashModel finds that.)
func TestTimeoutAbortThenProducerAbort(t *testing.T) {
	t.Parallel()
	now := time.Now()
	e := openEngine(t, t.TempDir(), Options{Now: func() time.Time { return now }})
	defer e.Close()
	e.CreateTopic("out", 1)
	p, _ := e.Partition("out", 0)
	c, _ := e.coordinator()
	tp, err := e.NewTransactionalProducer("slow", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	pid, epoch := tp.ID()
	if err := txnSend(t, tp, p, 's'); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Second)
	if n, err := c.AbortTimedOut(); n != 1 || err != nil {
		t.Fatalf("timed-out aborts: %d %v", n, err)
	}
	if err := tp.Commit(); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("commit: %v", err)
	}
	if err := tp.Abort(); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("abort: %v, want fenced", err)
	}
	if _, st, _ := meta3(c, "slow"); st != TxnCompleteAbort {
		t.Fatalf("state %v after the fenced abort", st)
	}
	tp, err = e.NewTransactionalProducer("slow", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if gp, ge := tp.ID(); gp != pid || ge != epoch+3 {
		t.Fatalf("new instance %d/%d, want %d/%d (fence, end, InitProducerID)", gp, ge, pid, epoch+3)
	}
	if err := txnSend(t, tp, p, 't'); err != nil {
		t.Fatal(err)
	}
	if err := tp.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := string(readCommittedValues(t, p)); got != "t" {
		t.Fatalf("read_committed %q, want \"t\"", got)
	}
}

// TestInitProducerIDAfterTV2End: a version-2 end bumps the epoch but is no
// InitProducerID, and its completion clears lastEpoch: an InitProducerID
// expecting the pair from before the end is a zombie's, fenced. Right
// after a rotation the previous pair is a retry; once the new id has
// finished a transaction it is fenced too.
func TestInitProducerIDAfterTV2End(t *testing.T) {
	t.Parallel()
	e := openEngine(t, t.TempDir(), Options{})
	defer e.Close()
	e.CreateTopic("out", 1)
	p, _ := e.Partition("out", 0)
	c, _ := e.coordinator()
	tp, err := e.NewTransactionalProducer("z", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	pid, epoch := tp.ID()
	if err := txnSend(t, tp, p, 'a'); err != nil {
		t.Fatal(err)
	}
	if err := tp.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.InitProducerIDExpected("z", time.Minute, pid, epoch); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("expecting the pair before the end: %v", err)
	}
	// Rotation at the exhausted epoch.
	exhaust(t, c, tp)
	if err := txnSend(t, tp, p, 'b'); err != nil {
		t.Fatal(err)
	}
	if err := tp.Commit(); err != nil {
		t.Fatal(err)
	}
	newPID, _ := tp.ID()
	if gp, ge, err := c.InitProducerIDExpected("z", time.Minute, pid, epochExhausted); err != nil || gp != newPID || ge != 0 {
		t.Fatalf("previous pair right after the rotation: %d/%d %v, want %d/0", gp, ge, err, newPID)
	}
	if err := txnSend(t, tp, p, 'c'); err != nil {
		t.Fatal(err)
	}
	if err := tp.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.InitProducerIDExpected("z", time.Minute, pid, epochExhausted); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("previous pair after a transaction of the new id: %v", err)
	}
}

// TestOrphanSweepVersion2: a marker of a version-2 commit lost after its
// completion was recorded is committed by the sweep at open when the
// orphan carries the epoch before the end's bump, or, for an end that
// rotated the producer id, the previous id at its last epoch; an orphan of
// such an id at another epoch is aborted.
func TestOrphanSweepVersion2(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	e.CreateTopic("out", 3)
	c, _ := e.coordinator()
	type orphan struct {
		meta      *txnMeta
		pid       int64 // the data's
		epoch     int16
		committed bool
	}
	orphans := []orphan{
		// Committed at epoch 7, bumped to 8 (lastEpoch cleared).
		{&txnMeta{id: "bumped", pid: 930, prevPID: -1, nextPID: -1, epoch: 8, lastEpoch: -1, timeout: time.Minute, state: TxnCompleteCommit, start: -1, tv2: true}, 930, 7, true},
		// Producer 910 rotated to 911 committing data at 32766.
		{&txnMeta{id: "rotated", pid: 911, prevPID: 910, nextPID: -1, epoch: 0, lastEpoch: epochExhausted, timeout: time.Minute, state: TxnCompleteCommit, start: -1, tv2: true}, 910, epochExhausted, true},
		// 920 rotated to 921 likewise, but its orphan is at epoch 7.
		{&txnMeta{id: "other", pid: 921, prevPID: 920, nextPID: -1, epoch: 0, lastEpoch: epochExhausted, timeout: time.Minute, state: TxnCompleteCommit, start: -1, tv2: true}, 920, 7, false},
	}
	for i, o := range orphans {
		p, _ := e.Partition("out", i)
		if _, err := p.Append(txnBatch(t, o.pid, o.epoch, 0, 1)); err != nil {
			t.Fatal(err)
		}
		c.mu.Lock()
		err := c.persist(o.meta, true)
		c.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
	}
	e.kill()
	e = openEngine(t, dir, Options{})
	defer e.Close()
	if _, err := e.coordinator(); err != nil {
		t.Fatal(err)
	}
	for i, o := range orphans {
		p, _ := e.Partition("out", i)
		if p.LastStableOffset() != p.log.HighWatermark() {
			t.Fatalf("%s: the orphan still pins the LSO", o.meta.id)
		}
		want := map[bool]string{true: "\x00", false: ""}[o.committed]
		if got := string(readCommittedValues(t, p)); got != want {
			t.Fatalf("%s: read_committed %q, want %q", o.meta.id, got, want)
		}
	}
}

// TestTxnMetaEncoding: version 0 is written while there is no next
// producer id and stays readable; version 1 carries it.
func TestTxnMetaEncoding(t *testing.T) {
	t.Parallel()
	m := txnMeta{id: "enc", pid: 12, prevPID: 11, nextPID: -1, epoch: 3, lastEpoch: 2, timeout: 90 * time.Second,
		state: TxnPrepareCommit, partitions: []TopicPartition{{"a", 1}, {"bb", 2}}, start: 1000, lastUpdate: 2000, tv2: true}
	same := func(a, b *txnMeta) bool { return reflect.DeepEqual(a, b) }
	v0 := m.encode(nil)
	if binary.BigEndian.Uint16(v0) != 0 {
		t.Fatalf("version %d without a next producer id, want 0", binary.BigEndian.Uint16(v0))
	}
	// The layout before version 1 existed, written by hand.
	be := binary.BigEndian
	var old []byte
	old = be.AppendUint16(old, 0)
	old = be.AppendUint64(old, 12)
	old = be.AppendUint64(old, 11)
	old = be.AppendUint16(old, 3)
	old = be.AppendUint16(old, 2)
	old = be.AppendUint32(old, 90000)
	old = append(old, byte(TxnPrepareCommit), 1)
	old = be.AppendUint64(old, 1000)
	old = be.AppendUint64(old, 2000)
	old = be.AppendUint32(old, 2)
	old = append(be.AppendUint16(old, 1), 'a')
	old = be.AppendUint32(old, 1)
	old = append(be.AppendUint16(old, 2), 'b', 'b')
	old = be.AppendUint32(old, 2)
	if !bytes.Equal(v0, old) {
		t.Fatalf("version 0 changed:\n%x\n%x", v0, old)
	}
	got, err := decodeTxnMeta("enc", old)
	if err != nil || !same(got, &m) {
		t.Fatalf("version 0: %+v %v", got, err)
	}
	m.nextPID = 4242
	v1 := m.encode(nil)
	if binary.BigEndian.Uint16(v1) != 1 || len(v1) != len(v0)+8 {
		t.Fatalf("with a next producer id: version %d, %d bytes", binary.BigEndian.Uint16(v1), len(v1))
	}
	got, err = decodeTxnMeta("enc", v1)
	if err != nil || !same(got, &m) {
		t.Fatalf("version 1: %+v %v", got, err)
	}
	// Malformed: every truncation, an unknown version, a bad state.
	for _, v := range [][]byte{v0, v1} {
		for n := range len(v) {
			if _, err := decodeTxnMeta("enc", v[:n]); !errors.Is(err, errTxnValue) {
				t.Fatalf("%d of %d bytes (version %d): %v", n, len(v), v[1], err)
			}
		}
	}
	bad := bytes.Clone(v1)
	bad[1] = 2
	if _, err := decodeTxnMeta("enc", bad); !errors.Is(err, errTxnValue) {
		t.Fatalf("version 2: %v", err)
	}
	bad = bytes.Clone(v0)
	bad[26] = 0x80 // state -128
	if _, err := decodeTxnMeta("enc", bad); !errors.Is(err, errTxnValue) {
		t.Fatalf("negative state: %v", err)
	}
}

// meta3 returns an id's epoch and state.
func meta3(c *Coordinator, id string) (int16, TxnState, bool) {
	_, epoch, st, ok := c.State(id)
	return epoch, st, ok
}
