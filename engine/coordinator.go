package engine

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/producer"
)

const (
	txnStateTopic = "__transaction_state"
	// MaxTransactionTimeout is transaction.max.timeout.ms.
	MaxTransactionTimeout = 15 * time.Minute
	// epochExhausted: at this epoch a new producer id is taken, so the
	// coordinator can always fence with epoch+1 (never handed out).
	epochExhausted = math.MaxInt16 - 1
)

// Coordinator is the in-process transaction coordinator: transactional id
// -> (producer id, epoch) and the transaction state machine (3.1), persisted
// in the __transaction_state topic and recovered on open. Every transition
// is written before it takes effect (an InitProducerID's epoch bump synced
// under every sync policy, a decision under SyncAlways: waitDecision says
// why); a decided transaction (PrepareCommit/PrepareAbort) is completed on
// recovery.
//
// One mutex serializes the coordinator's state changes: they happen once
// per transaction, not per batch, and are not on the append path.
type Coordinator struct {
	e     *Engine
	log   *Partition
	mu    sync.Mutex
	txns  map[string]*txnMeta
	value []byte
	// waits is complete's scratch list of marker syncs (under mu).
	waits []DurableWait
	// stopAfterMarkers, for crash tests: end an EndTxn after writing this
	// many markers (> 0), as if the process died there.
	stopAfterMarkers int
	// orphans are the partition transactions the open's sweep could not
	// end yet (under mu): AbortTimedOut retries them.
	orphans []orphan
}

// coordinator: see Frontend.Coordinator.
func (e *Engine) coordinator() (*Coordinator, error) {
	// The fast path: once made, the coordinator is published and never
	// replaced; the atomic load orders its construction before any use.
	if c := e.coord.Load(); c != nil {
		return c, nil
	}
	e.coordMu.Lock()
	defer e.coordMu.Unlock()
	if c := e.coord.Load(); c != nil {
		return c, nil
	}
	// A failure is not kept: the next call tries again, as a Kafka client
	// retries COORDINATOR_LOAD_IN_PROGRESS. (Without this: a transient
	// error, say a full disk at the first use, was returned for good.)
	c, err := openCoordinator(e)
	if err != nil {
		return nil, err
	}
	e.coord.Store(c)
	return c, nil
}

func openCoordinator(e *Engine) (*Coordinator, error) {
	if err := e.createTopic(txnStateTopic, 1, nil, createAny); err != nil {
		return nil, err
	}
	p, err := e.Partition(txnStateTopic, 0)
	if err != nil {
		return nil, err
	}
	c := &Coordinator{e: e, log: p, txns: map[string]*txnMeta{}}
	if err := c.load(); err != nil {
		return nil, err
	}
	// Finish what was decided before the last stop: markers may be
	// missing. One that cannot be completed now (a marker refused) stays
	// decided, for a retry of its end, a new instance or AbortTimedOut to
	// complete (stuckDecided): it must not keep the coordinator, and every
	// other transaction, from opening.
	//
	// Then the state log is reconciled with the partitions, for what a
	// machine crash took from its tail (fenceUnlisted, the sweep,
	// raiseToPartitions): after that every id can be initialised again,
	// and every open transaction is one an Ongoing record lists, which its
	// producer, a fence or its timeout ends.
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range c.sortedIDs() {
		if m := c.txns[id]; m.state == TxnPrepareCommit || m.state == TxnPrepareAbort {
			_ = c.complete(m)
		}
	}
	c.fenceUnlisted()
	// A marker the sweep cannot write now (a full producer table, a
	// segment too small for it) leaves that orphan for AbortTimedOut to
	// retry: it must not keep the coordinator, or the engine (Open), from
	// opening.
	c.sweepOrphans()
	c.raiseToPartitions()
	return c, nil
}

// sweepOrphans ends partition transactions that no coordinator record
// covers: their Ongoing record was not synced when the machine stopped, or
// their marker was lost after the completion was recorded. Left alone, such
// a transaction would pin the last stable offset forever.
//
// Under SyncAlways the partition's markers are synced before the
// completion is recorded (complete), so the second case cannot arise there:
// every orphan is a transaction the client never saw committed, and it is
// aborted. Elsewhere a transaction recorded CompleteCommit at the epoch its
// data carries is taken as committed, anything else aborted; with version
// 1 that epoch is also the next transaction's, so an orphan there may be a
// later, uncommitted one (those policies do not promise atomicity across a
// machine crash: waitDecision). (Without this: under SyncAlways the sweep
// committed a never-committed version-1 transaction whose Ongoing record a
// machine crash lost, on the strength of the previous one's commit.)
//
// Transactions the coordinator knows as ongoing or decided are not
// orphans: their end writes their markers (a decided one whose completion
// failed is retried, stuckDecided). (Without this: a commit whose
// completion failed at open was aborted here on the partitions it had not
// reached yet, and the retried completion's COMMIT then found nothing open
// there.) An orphan whose marker fails is kept in c.orphans for
// AbortTimedOut to retry.
func (c *Coordinator) sweepOrphans() {
	var failed []orphan
	for _, p := range c.e.Partitions() {
		if p == c.log {
			continue
		}
		for pid := range p.openTransactions() {
			if err := c.endOrphan(p, pid); err != nil {
				failed = append(failed, orphan{p, pid})
			}
		}
	}
	c.orphans = failed
}

// orphan is a partition transaction the sweep could not end yet.
type orphan struct {
	p   *Partition
	pid int64
}

// retryOrphans ends the orphans the last sweep could not (AbortTimedOut),
// keeping those that fail again.
func (c *Coordinator) retryOrphans() error {
	var errs []error
	left := c.orphans[:0]
	for _, o := range c.orphans {
		if _, open := o.p.openTransactions()[o.pid]; !open || o.p.deleted.Load() {
			continue
		}
		if err := c.endOrphan(o.p, o.pid); err != nil {
			errs = append(errs, err)
			left = append(left, o)
		}
	}
	c.orphans = left
	return errors.Join(errs...)
}

// endOrphan writes the marker that ends pid's open transaction in p if no
// transaction the coordinator knows covers it (under mu).
func (c *Coordinator) endOrphan(p *Partition, pid int64) error {
	m := c.byPID(pid)
	tp := TopicPartition{Topic: p.topic, Partition: int32(p.index)}
	if m != nil && m.pid == pid && (m.state == TxnOngoing || m.state == TxnPrepareCommit || m.state == TxnPrepareAbort) &&
		containsTP(m.partitions, tp) {
		return nil // live or decided: its end writes the markers
	}
	epoch, err := p.producerEpoch(pid)
	if err != nil {
		return err
	}
	commit := !p.log.MustWait() && m != nil && m.state == TxnCompleteCommit && committedEpoch(m, pid) == epoch
	if _, err := p.writeMarkerDurable(producer.Marker{ProducerID: pid, Epoch: epoch, Commit: commit}); err != nil {
		return fmt.Errorf("cannot end orphan transaction of producer %d in %s-%d: %w", pid, p.topic, p.index, err)
	}
	return nil
}

// byPID finds the transactional id whose producer id is pid, or whose end
// rotated it away from pid (its markers carried the previous id).
func (c *Coordinator) byPID(pid int64) *txnMeta {
	var rotated *txnMeta
	for _, m := range c.txns {
		if m.pid == pid {
			return m
		}
		if m.prevPID == pid && m.epoch == 0 {
			rotated = m
		}
	}
	return rotated
}

// committedEpoch is the epoch that the data of m's last committed
// transaction carries under producer id pid (m is CompleteCommit): the
// current epoch with version 1; with version 2 the one before the end's
// bump, or, if that end rotated the producer id, the previous id's last
// epoch. -2 if pid cannot have written it.
func committedEpoch(m *txnMeta, pid int64) int16 {
	switch {
	case pid == m.pid && !m.tv2:
		return m.epoch
	case pid == m.pid && m.epoch > 0:
		return m.epoch - 1
	case pid == m.prevPID && m.tv2 && m.epoch == 0:
		return m.lastEpoch
	}
	return -2
}

// load replays __transaction_state: the last value of each id wins.
func (c *Coordinator) load() error {
	l := c.log.log
	var d batch.Decoder
	for off := l.LogStartOffset(); off < l.HighWatermark(); {
		ch, err := l.Read(off, 1<<20)
		if err != nil {
			return fmt.Errorf("cannot load transaction state: %w", err)
		}
		batches := batch.NewIter(ch.Data)
		for batches.Next() {
			if batches.Batch().IsControl() {
				// Not a state record. Only a client could have put a
				// marker here, which the listener now refuses; one a past
				// version let in must not keep the engine from opening.
				continue
			}
			it, err := d.Records(batches.Batch())
			if err != nil {
				ch.Release()
				return fmt.Errorf("cannot load transaction state: %w", err)
			}
			var r batch.Record
			for it.Next(&r) {
				if r.Value == nil {
					delete(c.txns, string(r.Key)) // tombstone: expired id
					continue
				}
				m, err := decodeTxnMeta(string(r.Key), r.Value)
				if err != nil {
					ch.Release()
					return fmt.Errorf("cannot load transaction state of %q: %w", r.Key, err)
				}
				for _, pid := range [...]int64{m.pid, m.prevPID, m.nextPID} {
					c.e.pids.reserveAbove(pid) // see reserveAbove
				}
				c.txns[m.id] = m
			}
		}
		if err := batches.Err(); err != nil {
			ch.Release()
			return fmt.Errorf("cannot load transaction state: %w", err)
		}
		off = ch.NextOffset
		ch.Release()
	}
	return nil
}

// persist writes m's new value; with durable it also waits for the sync.
// Only InitProducerID's epoch bump (it fences) is persisted durable under
// every policy; a decision (PrepareCommit/PrepareAbort: markers follow it)
// is synced under SyncAlways (waitDecision). A lost Ongoing record leaves
// partition transactions no coordinator knows, which the orphan sweep at
// open aborts; a lost Complete record leaves the Prepare record, whose
// markers recovery rewrites.
func (c *Coordinator) persist(m *txnMeta, durable bool) error {
	end, err := c.appendState(m)
	if err != nil || !durable {
		return err
	}
	if err := c.waitState(end); err != nil {
		return fmt.Errorf("cannot persist transaction %q: %w", m.id, err)
	}
	return nil
}

// appendState appends m's state record (under mu, so records are in the
// order of the transitions) and returns the offset its durability waits
// for. It does not wait for the log's sync policy: a record that must be
// durable is waited for with waitState, the others need not be.
func (c *Coordinator) appendState(m *txnMeta) (int64, error) {
	m.lastUpdate = c.e.opts.Now().UnixMilli()
	c.value = m.encode(c.value[:0])
	b := batch.NewBuilder(batch.CodecNone)
	b.Append(m.lastUpdate, []byte(m.id), c.value, nil)
	v, err := b.Build()
	if err != nil {
		return 0, err
	}
	res, _, err := c.log.appendNoWait(bytes.Clone(v))
	if err != nil {
		return 0, fmt.Errorf("cannot persist transaction %q: %w", m.id, err)
	}
	return res.LastOffset + 1, nil
}

// waitState waits until the state records below end are durable, whatever
// the engine's sync policy: an epoch bump of InitProducerID (the fence) is
// synced even under "never".
func (c *Coordinator) waitState(end int64) error { return c.log.log.WaitDurable(end) }

// waitDecision makes a decision record durable before any marker is
// written, in the sense of the log's sync policy: under SyncAlways it waits
// for the fdatasync; under the other policies the record is in the log
// (the page cache) before the markers are, which is what those policies
// promise of every write: it survives a process crash, in write order,
// and a machine crash may lose an unsynced tail.
//
// Syncing the decision alone under those policies would buy nothing: a
// transaction's batches and markers are not synced there either, so a
// machine crash can lose part of a transaction's data whether or not its
// decision survived (recovery would complete the commit over whatever
// data is left). Atomicity across machine crashes needs SyncAlways, where
// the batches, then the decision, then the markers are each synced in that
// order. The price of the old rule, a decision synced under every policy,
// was one fdatasync per transaction (100-170 us here): a producer
// committing every 1000 small batches ran at 0.51-0.67x of idempotent
// throughput.
func (c *Coordinator) waitDecision(end int64) error {
	if h := c.e.opts.private.decisionSyncHook; h != nil {
		if err := h(); err != nil {
			return err
		}
	}
	if !c.log.log.MustWait() {
		return nil
	}
	return c.waitState(end)
}

// InitProducerID gives a transactional id its producer id and a new epoch,
// fencing every earlier instance (3.2). An open transaction of the previous
// instance is aborted first and the call answers ErrConcurrentTransactions:
// the caller retries, as Kafka's clients do, and gets the next epoch.
func (c *Coordinator) InitProducerID(id string, timeout time.Duration) (int64, int16, error) {
	return c.InitProducerIDExpected(id, timeout, -1, -1)
}

// InitProducerIDExpected is InitProducerID with the producer id and epoch
// the client last had (KIP-360; -1, -1 for none), which lets a producer
// bump its own epoch after an error and have a lost response retried
// without being fenced: the expected pair must be the current one, or the
// previous epoch (a retry, answered with the current epoch unchanged), or
// the previous producer id at the exhausted epoch (a retry after rotation).
// Anything else is PRODUCER_FENCED.
func (c *Coordinator) InitProducerIDExpected(id string, timeout time.Duration, expectedPID int64, expectedEpoch int16) (int64, int16, error) {
	if id == "" {
		return 0, 0, fmt.Errorf("cannot init producer: empty transactional id: %w", ErrInvalidRequest)
	}
	if timeout <= 0 || timeout > MaxTransactionTimeout {
		return 0, 0, fmt.Errorf("cannot init producer %q: timeout %v: %w", id, timeout, ErrInvalidTransactionTimeout)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.txns[id]
	if m == nil {
		pid, err := c.e.pids.allocate()
		if err != nil {
			return 0, 0, err
		}
		m = &txnMeta{id: id, pid: pid, prevPID: -1, nextPID: -1, epoch: -1, lastEpoch: -1, state: TxnEmpty, start: -1}
	}
	expected := expectedPID >= 0
	if expected && m.epoch != -1 && expectedPID != m.pid &&
		!(expectedPID == m.prevPID && expectedEpoch >= epochExhausted) {
		return 0, 0, fmt.Errorf("cannot init producer %q: expected producer %d, current %d: %w", id, expectedPID, m.pid, ErrProducerFenced)
	}
	if stuckDecided(m) {
		// Complete what an earlier end decided before fencing (its
		// markers carry its epoch); failing that, the client retries.
		if err := c.complete(m); err != nil {
			return 0, 0, fmt.Errorf("cannot init producer %q: transaction %v (%v): %w", id, m.state, err, ErrConcurrentTransactions)
		}
		m = c.txns[id]
	}
	// The state comes first, as in Kafka's handleInitProducerId: a
	// transaction in progress is never answered with the pair its
	// producer uses, not even to a retry. (Without this: a retry after a
	// rotation got the new pair while its transaction was ongoing.)
	switch m.state {
	case TxnPrepareCommit, TxnPrepareAbort:
		return 0, 0, fmt.Errorf("cannot init producer %q: transaction %v: %w", id, m.state, ErrConcurrentTransactions)
	case TxnOngoing:
		// Fence the running instance and abort its transaction with the
		// bumped epoch; the retry bumps once more.
		if err := c.endLocked(m, false, true, m.tv2); err != nil {
			return 0, 0, err
		}
		return 0, 0, fmt.Errorf("cannot init producer %q: aborted the fenced instance's transaction: %w", id, ErrConcurrentTransactions)
	}
	if expected && expectedPID == m.prevPID && m.prevPID >= 0 && expectedPID != m.pid {
		// A retry after the rotation to a new producer id gets the same
		// answer; the previous id's last epoch is the retry's mark (a
		// transaction completed since clears it, 3.5).
		if expectedEpoch != m.lastEpoch {
			return 0, 0, fmt.Errorf("cannot init producer %q: expected producer %d, rotated to %d: %w", id, expectedPID, m.pid, ErrProducerFenced)
		}
		return m.pid, m.epoch, nil
	}
	next := *m
	next.timeout = timeout
	switch {
	case expected && m.epoch != -1 && expectedEpoch == m.lastEpoch && expectedEpoch != m.epoch:
		// The client's earlier bump went through but it lost the answer.
		return m.pid, m.epoch, nil
	case expected && m.epoch != -1 && expectedEpoch != m.epoch:
		return 0, 0, fmt.Errorf("cannot init producer %q: expected epoch %d, current %d: %w", id, expectedEpoch, m.epoch, ErrProducerFenced)
	case m.epoch >= epochExhausted:
		pid, err := c.e.pids.allocate()
		if err != nil {
			return 0, 0, err
		}
		next.prevPID, next.pid, next.epoch, next.lastEpoch = m.pid, pid, 0, -1
		if expected {
			next.lastEpoch = m.epoch
		}
	case expected:
		next.lastEpoch, next.epoch = m.epoch, m.epoch+1
	default:
		next.lastEpoch, next.epoch = -1, m.epoch+1
	}
	next.state, next.partitions, next.start = TxnEmpty, nil, -1
	if err := c.persist(&next, true); err != nil {
		return 0, 0, err
	}
	c.txns[id] = &next
	return next.pid, next.epoch, nil
}

// lookup checks a request's producer id and epoch against the id's
// metadata (3.3, 3.5).
func (c *Coordinator) lookup(id string, pid int64, epoch int16) (*txnMeta, error) {
	m := c.txns[id]
	if m == nil || m.pid != pid {
		return nil, fmt.Errorf("cannot use transactional id %q with producer %d: %w", id, pid, ErrInvalidProducerIDMapping)
	}
	if epoch != m.epoch {
		return nil, fmt.Errorf("cannot use transactional id %q: epoch %d, current %d: %w", id, epoch, m.epoch, ErrProducerFenced)
	}
	return m, nil
}

// AddPartitions adds partitions to the id's transaction, starting it if
// needed (the version 1 flow; with version 2 the first transactional write
// to a partition adds it, see TransactionalProducer).
func (c *Coordinator) AddPartitions(id string, pid int64, epoch int16, parts []TopicPartition, tv2 bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, err := c.lookup(id, pid, epoch)
	if err != nil {
		return err
	}
	switch m.state {
	case TxnPrepareCommit, TxnPrepareAbort:
		return fmt.Errorf("cannot add partitions to %q: %v: %w", id, m.state, ErrConcurrentTransactions)
	}
	next := *m
	next.partitions = append([]TopicPartition(nil), m.partitions...)
	added := false
	for _, tp := range parts {
		if _, err := c.e.Partition(tp.Topic, int(tp.Partition)); err != nil {
			return err
		}
		if !containsTP(next.partitions, tp) {
			next.partitions = append(next.partitions, tp)
			added = true
		}
	}
	if m.state == TxnOngoing && !added {
		return nil
	}
	if m.state != TxnOngoing {
		next.start = c.e.opts.Now().UnixMilli()
		next.tv2 = tv2
	}
	next.state = TxnOngoing
	if err := c.persist(&next, beginsAfterUnbumpedEnd(m) && c.log.log.MustWait()); err != nil {
		return err
	}
	c.txns[id] = &next
	return nil
}

// beginsAfterUnbumpedEnd reports whether a transaction that begins on m
// follows a completed transaction whose markers did not bump the epoch
// (version 1): its batches then carry the epoch of those markers, and
// nothing in a partition tells the previous transaction's marker from a
// rewrite of it. Under SyncAlways its Ongoing record (and so the
// completion record before it in the log) is made durable before any of
// its batches is written: a machine crash can then never leave the state
// log at the previous transaction's decision while a partition holds the
// new transaction's batches, where recovery, rewriting the decided marker,
// would end the new transaction with the old one's decision (commit data
// no one committed). With version 2 the bumped epoch tells them apart
// (markerSettled), and the record need not wait.
func beginsAfterUnbumpedEnd(m *txnMeta) bool {
	return (m.state == TxnCompleteCommit || m.state == TxnCompleteAbort) && !m.tv2
}

func containsTP(tps []TopicPartition, tp TopicPartition) bool {
	for _, x := range tps {
		if x == tp {
			return true
		}
	}
	return false
}

// EndTxn commits or aborts the id's transaction (3.5) and returns the
// producer id and epoch the producer goes on with. It follows the
// transaction version of the id's transaction (AddPartitions' tv2; with
// none open, that of the last one). With version 1 the pair stays. With
// version 2 every end bumps the epoch (markers carry the bumped one), and
// an end at the exhausted epoch moves the id to a new producer id at
// epoch 0; a retry of an end (the request's epoch one below the stored
// one, or the previous producer id at the exhausted epoch) gets the same
// answer, without new markers.
func (c *Coordinator) EndTxn(id string, pid int64, epoch int16, commit bool) (int64, int16, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.txns[id]
	if m != nil && m.tv2 {
		return c.endTxnV2(id, pid, epoch, commit)
	}
	return c.endTxnV1(id, pid, epoch, commit)
}

// endTxn is EndTxn with the request's transaction version given, as
// Kafka's EndTxn request version gives it (v5+: version 2).
func (c *Coordinator) endTxn(id string, pid int64, epoch int16, commit, tv2 bool) (int64, int16, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if tv2 {
		return c.endTxnV2(id, pid, epoch, commit)
	}
	return c.endTxnV1(id, pid, epoch, commit)
}

// endTxnV1 is 3.5's classic EndTxn: the epoch must be the current one,
// and only an Ongoing transaction can end.
func (c *Coordinator) endTxnV1(id string, pid int64, epoch int16, commit bool) (int64, int16, error) {
	m, err := c.lookup(id, pid, epoch)
	if err != nil {
		return -1, -1, err
	}
	switch {
	case m.state == TxnOngoing:
		if err := c.endLocked(m, commit, false, false); err != nil {
			return -1, -1, err
		}
		m = c.txns[id]
		return m.pid, m.epoch, nil
	case m.state == TxnCompleteCommit && commit, m.state == TxnCompleteAbort && !commit:
		return m.pid, m.epoch, nil // retry of a finished end
	case m.state == TxnPrepareCommit && commit, m.state == TxnPrepareAbort && !commit:
		if !stuckDecided(m) {
			return -1, -1, fmt.Errorf("cannot end %q: %v: %w", id, m.state, ErrConcurrentTransactions)
		}
		// An earlier attempt decided but failed to complete: write the
		// markers now, as endTxnV2 does. (Without this: a version-1
		// transaction stayed PrepareX, pinning its partitions' LSO, until
		// a restart.)
		// The answer stays 3.5's CONCURRENT_TRANSACTIONS: the client's
		// retry finds the transaction complete.
		if err := c.complete(m); err != nil {
			return -1, -1, fmt.Errorf("cannot end %q: %v in progress (%v): %w", id, m.state, err, ErrConcurrentTransactions)
		}
		return -1, -1, fmt.Errorf("cannot end %q: %v completed, retry: %w", id, m.state, ErrConcurrentTransactions)
	}
	return -1, -1, fmt.Errorf("cannot end %q (commit %v) in state %v: %w", id, commit, m.state, ErrInvalidTxnState)
}

// endTxnV2 is 3.5's EndTxn for transaction version 2 (KIP-890 part 2).
// Epochs: Ongoing and Empty need the current one; PrepareCommit and
// PrepareAbort only a retry; CompleteCommit and CompleteAbort a retry or
// the current one. Then, by state:
//
//	                 retry                  current
//	Ongoing          -                      PrepareX, markers, CompleteX
//	PrepareX         same end: CONCURRENT_TRANSACTIONS, else INVALID_TXN_STATE
//	CompleteCommit   COMMIT: NONE           COMMIT: INVALID_TXN_STATE
//	                 ABORT: INVALID_TXN_STATE  ABORT: empty abort
//	CompleteAbort    ABORT: NONE            ABORT: empty abort
//	                 COMMIT: PRODUCER_FENCED   COMMIT: INVALID_TXN_STATE
//	Empty            -                      ABORT: empty abort, COMMIT: INVALID_TXN_STATE
//
// An empty abort bumps the epoch through PrepareAbort and CompleteAbort
// with no partitions, so no markers. A COMMIT that finds CompleteAbort at
// a retry epoch raced with an abort the coordinator made itself (a
// timeout): it is fenced (3.6), as Kafka answers it since KAFKA-20785.
func (c *Coordinator) endTxnV2(id string, pid int64, epoch int16, commit bool) (int64, int16, error) {
	m := c.txns[id]
	if m == nil {
		return -1, -1, fmt.Errorf("cannot use transactional id %q with producer %d: %w", id, pid, ErrInvalidProducerIDMapping)
	}
	// The retry of an end that moved the id to a new producer id.
	// lastEpoch marks the client's own end (a fence's rotation leaves -1):
	// a fenced instance at the exhausted epoch is no retry.
	retryOnOverflow := m.prevPID >= 0 && pid == m.prevPID && pid != m.pid && epoch == epochExhausted && m.epoch == 0 && m.lastEpoch == epoch
	if pid != m.pid && !retryOnOverflow {
		if m.prevPID >= 0 && pid == m.prevPID && epoch == epochExhausted && m.epoch == 0 && m.lastEpoch == -1 {
			// The instance a fence rotated away from (a timeout at the
			// exhausted epoch): its end would be a retry of the rotating
			// end were that end its own, and is fenced, as 3.6 answers a
			// fenced producer's EndTxn.
			return -1, -1, fmt.Errorf("cannot end %q: producer %d was fenced and replaced by %d: %w", id, pid, m.pid, ErrProducerFenced)
		}
		return -1, -1, fmt.Errorf("cannot use transactional id %q with producer %d: %w", id, pid, ErrInvalidProducerIDMapping)
	}
	retryOnBump := pid == m.pid && int32(m.epoch) == int32(epoch)+1
	retry := retryOnBump || retryOnOverflow
	current := pid == m.pid && epoch == m.epoch
	var valid bool
	switch m.state {
	case TxnPrepareCommit, TxnPrepareAbort:
		valid = retryOnBump
	case TxnCompleteCommit, TxnCompleteAbort:
		valid = retry || current
	default:
		valid = current
	}
	if !valid {
		return -1, -1, fmt.Errorf("cannot end %q in state %v: producer %d epoch %d, current %d epoch %d: %w", id, m.state, pid, epoch, m.pid, m.epoch, ErrProducerFenced)
	}
	invalid := func() (int64, int16, error) {
		return -1, -1, fmt.Errorf("cannot end %q (commit %v) in state %v: %w", id, commit, m.state, ErrInvalidTxnState)
	}
	end := func() (int64, int16, error) {
		if err := c.endLocked(m, commit, false, true); err != nil {
			return -1, -1, err
		}
		m := c.txns[id]
		return m.pid, m.epoch, nil
	}
	answer := func() (int64, int16, error) {
		if m.epoch == math.MaxInt16 {
			// Only a version-1 fence leaves this epoch, and it is never
			// handed out (3.2): the producer must initialize again.
			return -1, -1, fmt.Errorf("cannot end %q: epoch exhausted by a fence: %w", id, ErrProducerFenced)
		}
		return m.pid, m.epoch, nil
	}
	switch m.state {
	case TxnOngoing:
		return end()
	case TxnEmpty:
		if commit {
			return invalid()
		}
		return end() // empty abort
	case TxnCompleteCommit:
		switch {
		case commit && retry:
			return answer()
		case commit, retry:
			return invalid()
		}
		return end() // empty abort
	case TxnCompleteAbort:
		switch {
		case !commit && retry:
			return answer()
		case !commit:
			return end() // empty abort
		case retry:
			return -1, -1, fmt.Errorf("cannot commit %q: its transaction was aborted by the coordinator: %w", id, ErrProducerFenced)
		}
		return invalid()
	case TxnPrepareCommit, TxnPrepareAbort:
		if commit != (m.state == TxnPrepareCommit) {
			if m.lastEpoch == -1 && m.state == TxnPrepareAbort {
				// The coordinator's own abort (a timeout or a new
				// instance's fence) is being decided: the producer is
				// fenced, as it is once that abort completes (above).
				return -1, -1, fmt.Errorf("cannot commit %q: its transaction is being aborted by the coordinator: %w", id, ErrProducerFenced)
			}
			return invalid()
		}
		if m.deciding {
			return -1, -1, fmt.Errorf("cannot end %q: %v being decided: %w", id, m.state, ErrConcurrentTransactions)
		}
		// The decision stands but its markers are not all written (an
		// earlier attempt failed): write them now, as Kafka's marker sender
		// keeps doing in the background, and have the client retry.
		if err := c.complete(m); err != nil {
			return -1, -1, fmt.Errorf("cannot end %q: %v in progress (%v): %w", id, m.state, err, ErrConcurrentTransactions)
		}
		return -1, -1, fmt.Errorf("cannot end %q: %v completed, retry: %w", id, m.state, ErrConcurrentTransactions)
	}
	return invalid()
}

// endLocked runs the two phases: the decision (PrepareX, durable), the
// markers, then CompleteX. fence bumps the epoch first (a timeout or a new
// instance): the markers then carry the bumped epoch and fence the old
// producer at every partition. tv2 is the end's transaction version (for
// a fence, the transaction's): a client's version-2 end bumps the epoch
// too, remembering the old one as lastEpoch; an empty abort (Empty,
// CompleteCommit, CompleteAbort) has no partitions and so writes no
// markers. A version-2 end at the exhausted epoch, a fence included (as
// Kafka does since KAFKA-20090), takes a new producer id with the decision
// (nextPID), which the id moves to at epoch 0 on completion: a version-2
// transaction never rests at MaxInt16.
func (c *Coordinator) endLocked(m *txnMeta, commit, fence, tv2 bool) error {
	next := *m
	next.nextPID = -1
	if fence || tv2 {
		if m.epoch == math.MaxInt16 {
			return fmt.Errorf("cannot end %q: epoch %d cannot be bumped: %w", m.id, m.epoch, ErrProducerFenced)
		}
		next.epoch = m.epoch + 1
		next.lastEpoch = m.epoch
		rotate := tv2 && m.epoch >= epochExhausted
		if fence {
			next.lastEpoch = -1
			if tv2 && m.epoch < epochExhausted {
				// Kafka's version-2 fence bumps twice: once to fence,
				// once more for the end every version-2 end makes. With
				// one bump the fenced instance's own end, one epoch
				// below, passed for the retry of a version-2 end
				// (retryOnBump) and took the new epoch: a timed-out
				// producer's Abort un-fenced it.
				next.epoch = m.epoch + 2
				rotate = next.epoch >= epochExhausted
			}
		} else {
			next.tv2 = true
		}
		if rotate {
			pid, err := c.e.pids.allocate()
			if err != nil {
				return fmt.Errorf("cannot end %q: %w", m.id, err)
			}
			next.nextPID = pid
		}
	} else {
		next.tv2 = false
	}
	next.state = TxnPrepareAbort
	if commit {
		next.state = TxnPrepareCommit
	}
	if m.state != TxnOngoing {
		// An empty abort: no partitions; its start is now (Kafka's).
		next.partitions, next.start = nil, c.e.opts.Now().UnixMilli()
	}
	next.deciding = true
	end, err := c.appendState(&next)
	if err != nil {
		return err
	}
	c.txns[m.id] = &next
	// The decision's sync runs without the coordinator's mutex: the ends
	// of other transactional ids append their decisions meanwhile and
	// share the sync (the log's group commit) instead of queueing behind
	// it (with 4 producers committing every 1000 batches, the queue was
	// 1 s of blocked producer time per second of run). Meanwhile this id
	// reads as Prepare*, deciding: requests on it answer
	// CONCURRENT_TRANSACTIONS and nothing writes its markers, which must
	// never be durable before the decision.
	c.mu.Unlock()
	if h := c.e.opts.private.decidingHook; h != nil {
		h(m.id)
	}
	err = c.waitDecision(end)
	c.mu.Lock()
	if err != nil {
		// The decision may not be durable, so no marker may follow it:
		// the id goes back to its state before the decision (as Kafka's
		// coordinator drops a transition whose log write failed), and a
		// retry decides again if the log still takes appends. Left
		// PrepareX, a retry would have written the markers.
		c.txns[m.id] = m
		return fmt.Errorf("cannot persist decision of %q: %w", m.id, err)
	}
	decided := next
	decided.deciding = false
	c.txns[m.id] = &decided
	return c.complete(&decided)
}

// complete writes the markers of a decided transaction and records its
// completion. Markers are idempotent to rewrite, so recovery may repeat
// the ones written before a crash. The completion clears lastEpoch (a
// retry of an earlier InitProducerID cannot follow a finished
// transaction), except where it moves the id to nextPID at epoch 0: there
// it keeps the previous id's last epoch, which marks retries (3.2).
func (c *Coordinator) complete(m *txnMeta) error {
	commit := m.state == TxnPrepareCommit
	// Every marker is appended first and the syncs they need awaited
	// together (WaitAll): under SyncAlways a commit over N partitions pays
	// one sync's latency for its markers, not N.
	waits := c.waits[:0]
	defer func() { c.waits = waits[:0] }()
	for i, tp := range m.partitions {
		if c.stopAfterMarkers > 0 && i == c.stopAfterMarkers {
			waitAll(waits)
			return errCrashTest
		}
		p, err := c.e.Partition(tp.Topic, int(tp.Partition))
		if err != nil {
			continue // deleted since: Kafka drops such markers
		}
		if settled, err := markerSettled(p, m.pid, m.epoch, m.tv2); err != nil {
			waitAll(waits)
			return fmt.Errorf("cannot complete transaction %q: %w", m.id, err)
		} else if settled {
			continue
		}
		res, wait, err := p.writeMarker(producer.Marker{ProducerID: m.pid, Epoch: m.epoch, Commit: commit, Strict: m.tv2})
		if err != nil {
			waitAll(waits)
			return fmt.Errorf("cannot complete transaction %q: %w", m.id, p.gone(err))
		}
		if wait {
			waits = append(waits, DurableWait{P: p, End: res.LastOffset + 1})
		}
	}
	waitAll(waits)
	for _, w := range waits {
		if w.Err != nil {
			return fmt.Errorf("cannot complete transaction %q: %w", m.id, w.Err)
		}
	}
	next := *m
	next.state = TxnCompleteAbort
	if commit {
		next.state = TxnCompleteCommit
	}
	next.partitions, next.start = nil, -1
	if m.nextPID >= 0 {
		next.prevPID, next.pid, next.nextPID, next.epoch = m.pid, m.nextPID, -1, 0
	} else {
		next.lastEpoch = -1
	}
	if err := c.persist(&next, false); err != nil {
		return err
	}
	c.txns[m.id] = &next
	return nil
}

var errCrashTest = fmt.Errorf("stopped by a crash test")

// AbortTimedOut aborts, with an epoch bump that fences the producer, every
// ongoing transaction older than its timeout (3.6), and returns how many.
// It also writes the missing markers of every decided transaction whose
// completion failed (PrepareCommit or PrepareAbort, not being decided), and
// of the orphans the open's sweep could not end, as Kafka's marker sender
// keeps retrying in the background: run periodically, it completes them
// once the cause is gone. One id's failure does not stop
// the others; the errors are joined.
func (c *Coordinator) AbortTimedOut() (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.e.opts.Now().UnixMilli()
	timedOut := func(m *txnMeta) bool {
		return m != nil && m.state == TxnOngoing && m.start >= 0 && m.start+m.timeout.Milliseconds() < now
	}
	// endLocked releases the mutex while a decision syncs, when other
	// requests may change any id's state: the ids are collected first and
	// each is looked up again, to act on its state of the moment.
	var ends, completes []string
	for id, m := range c.txns {
		switch {
		case timedOut(m):
			ends = append(ends, id)
		case stuckDecided(m):
			completes = append(completes, id)
		}
	}
	n := 0
	var errs []error
	for _, id := range ends {
		if m := c.txns[id]; timedOut(m) {
			if err := c.endLocked(m, false, true, m.tv2); err != nil {
				errs = append(errs, err)
				continue
			}
			n++
		}
	}
	for _, id := range completes {
		if m := c.txns[id]; stuckDecided(m) {
			if err := c.complete(m); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := c.retryOrphans(); err != nil {
		errs = append(errs, err)
	}
	return n, errors.Join(errs...)
}

// stuckDecided reports whether m's transaction is decided but its
// completion failed: a marker write or the completion record (not one
// whose decision is still being synced, which its EndTxn completes).
func stuckDecided(m *txnMeta) bool {
	return m != nil && (m.state == TxnPrepareCommit || m.state == TxnPrepareAbort) && !m.deciding
}

// State returns the id's producer id, epoch and state, for tools and tests.
func (c *Coordinator) State(id string) (pid int64, epoch int16, state TxnState, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.txns[id]
	if m == nil {
		return 0, 0, 0, false
	}
	return m.pid, m.epoch, m.state, true
}

// ExpireTransactionalIDs forgets transactional ids idle for longer than
// TransactionalIDExpiration with no transaction in progress (3.6): a
// tombstone is written, and a later request with the old producer id gets
// INVALID_PRODUCER_ID_MAPPING. It returns how many ids expired.
func (c *Coordinator) ExpireTransactionalIDs() (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	limit := c.e.opts.Now().Add(-c.e.opts.TransactionalIDExpiration).UnixMilli()
	n := 0
	for id, m := range c.txns {
		switch m.state {
		case TxnEmpty, TxnCompleteCommit, TxnCompleteAbort:
		default:
			continue
		}
		if m.lastUpdate > limit {
			continue
		}
		b := batch.NewBuilder(batch.CodecNone)
		b.Append(c.e.opts.Now().UnixMilli(), []byte(id), nil, nil)
		v, err := b.Build()
		if err != nil {
			return n, err
		}
		res, err := c.log.appendWait(bytes.Clone(v), writeOpts{})
		if err == nil {
			err = c.log.log.WaitDurable(res.LastOffset + 1)
		}
		if err != nil {
			return n, fmt.Errorf("cannot expire transactional id %q: %w", id, err)
		}
		delete(c.txns, id)
		n++
	}
	return n, nil
}
