package engine

import (
	"errors"
	"fmt"
	"github.com/idemlog/idemlog/partition"
	"sync"
)

// Entry points for a network front end (the kafka package), which pipelines
// durability waits and addresses the offsets store by group.

// AppendNoWait is Append without the wait for the sync policy's promise:
// when wait is true the caller must call Log().WaitDurable(res.LastOffset+1)
// before acknowledging the batch. A front end appends a request's batches
// to all their partitions first and then waits once per partition, so the
// partitions' syncs overlap instead of running one after another.
func (p *Partition) AppendNoWait(b []byte) (res AppendResult, wait bool, err error) {
	res, wait, err = p.write(b)
	return res, wait, p.gone(err)
}

// OffsetsPartition returns the partition of the consumer-offsets topic that
// holds group's commits (creating the internal topic on first use): what
// AddOffsetsToTxn adds to a transaction.
func (e *Engine) OffsetsPartition(group string) (TopicPartitionRef, error) {
	if group == "" {
		return TopicPartitionRef{}, ErrInvalidGroupID
	}
	if _, err := e.offsets(); err != nil {
		return TopicPartitionRef{}, err
	}
	return TopicPartitionRef{Topic: ConsumerOffsetsTopic, Partition: int32(GroupPartition(group))}, nil
}

// TransactionStateTopic is the internal topic of the transaction
// coordinator's state.
const TransactionStateTopic = txnStateTopic

// Verify is the check a partition leader makes before the first
// transactional append of a producer (KIP-890 part 1): the transactional id
// maps to pid, epoch is current, and the transaction is ongoing with tp in
// it. ErrInvalidProducerIDMapping, ErrProducerFenced or ErrInvalidTxnState
// otherwise. The check and the append are not atomic (Kafka closes that
// window with a per-partition guard); the producer-state epoch check in the
// append still fences any older epoch.
func (c *Coordinator) Verify(id string, pid int64, epoch int16, tp TopicPartitionRef) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, err := c.lookup(id, pid, epoch)
	if err != nil {
		return err
	}
	if m.state != TxnOngoing || !containsTP(m.partitions, tp) {
		return fmt.Errorf("cannot append to %s-%d for %q: partition not in the transaction (%v): %w", tp.Topic, tp.Partition, id, m.state, ErrInvalidTxnState)
	}
	return nil
}

// TxnOpen reports whether pid has a transaction open in the partition,
// that is, whether a transactional append of pid continues a transaction
// the coordinator already verified. It never waits: an entry another
// append holds right now reads as "not open", which only costs the caller
// a Coordinator.Verify. Only a transaction at epoch counts, as Kafka's
// hasOngoingTransaction(producerId, producerEpoch): a batch at another
// epoch is verified, so one at a made-up higher epoch cannot move the
// partition's producer past the coordinator's, whose marker would then be
// refused and the transaction stuck in PrepareCommit.
func (p *Partition) TxnOpen(pid int64, epoch int16) bool {
	ent, ok := p.producers.TryAcquire(pid)
	if !ok {
		return false
	}
	open := ent.State().TxnFirstOffset() >= 0 && ent.State().Epoch() == epoch
	p.producers.Release(ent)
	return open
}

// OpenTransactions returns how many transactional ids have a transaction
// ongoing or being completed.
func (c *Coordinator) OpenTransactions() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, m := range c.txns {
		switch m.state {
		case TxnOngoing, TxnPrepareCommit, TxnPrepareAbort:
			n++
		}
	}
	return n
}

// DurableWait is one partition's outstanding wait for its sync policy's
// promise: offsets below End durable (or visible, per the policy).
type DurableWait struct {
	P   *Partition
	End int64
	Err error // set by WaitAll
}

// WaitAll waits for every ws[i] at once, so the partitions' syncs run side
// by side instead of one after another (a request or a transaction that
// touched several partitions under SyncAlways pays one sync's latency, not
// one per partition). Each partition's group-commit leader is the goroutine
// that waits on it, hence one goroutine per partition beyond the first.
func WaitAll(ws []DurableWait) {
	switch len(ws) {
	case 0:
		return
	case 1:
		ws[0].Err = ws[0].P.gone(ws[0].P.log.WaitDurable(ws[0].End))
		return
	}
	var wg sync.WaitGroup
	for i := 1; i < len(ws); i++ {
		w := &ws[i]
		wg.Go(func() { w.Err = w.P.gone(w.P.log.WaitDurable(w.End)) })
	}
	ws[0].Err = ws[0].P.gone(ws[0].P.log.WaitDurable(ws[0].End))
	wg.Wait()
}

// ApplyRetention applies every partition's retention (time and size; the
// internal topics have none) and returns how many segments were deleted.
// Embedders call it periodically, as Kafka's log.retention.check.interval.ms
// does; the Kafka listener runs it on its maintenance tick.
func (e *Engine) ApplyRetention() (int, error) {
	n := 0
	var errs []error
	for _, p := range *e.parts.Load() {
		if h := e.opts.private.applyRetentionHook; h != nil {
			h(p)
		}
		d, err := p.log.ApplyRetention()
		n += d
		// A partition deleted (or an engine closed) meanwhile has no
		// retention left to apply. (Without this: reported as errors.)
		if err != nil && !(errors.Is(err, partition.ErrClosed) && (p.deleted.Load() || e.closed.Load())) {
			errs = append(errs, fmt.Errorf("cannot apply retention to %s-%d: %w", p.topic, p.index, err))
		}
	}
	return n, errors.Join(errs...)
}
