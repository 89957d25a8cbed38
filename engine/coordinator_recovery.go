package engine

import "slices"

// producerTxn returns pid's epoch in p (-1 if p has never seen it) and
// whether pid has a transaction open there.
func (p *Partition) producerTxn(pid int64) (epoch int16, open bool, err error) {
	ent, created, err := p.producers.Acquire(pid)
	if err != nil {
		return -1, false, err
	}
	st := ent.State()
	epoch = -1
	if st.EpochPlus1 != 0 {
		epoch = st.Epoch()
	}
	open = st.TxnFirstOffset() >= 0
	if created {
		p.producers.Remove(ent)
	} else {
		p.producers.Release(ent)
	}
	return epoch, open, nil
}

// markerSettled reports whether p needs no marker at epoch for pid's
// decided transaction: p already holds that marker or has moved past it.
//
// A partition's epoch for pid only rises through what follows a decision:
// the decision's own markers, then the data and markers of later
// transactions, which begin only once every marker of this one was
// written. So an epoch above the marker's means the partition went on
// after it (the marker was written there, or a later fence superseded
// it), and a marker at epoch would be refused ("epoch below"). With
// transaction version 2 (strict markers) the data of the decided
// transaction carries the epoch before the bump and its markers the bumped
// one, so a transaction open at the marker's epoch is the next one's,
// begun after this marker was written. Rewriting the marker there would be
// refused too ("epoch not bumped"), and accepting it would end the next
// transaction with this one's decision.
//
// Recovery meets both after a machine crash lost the completion record of
// a transaction (and the records after it) while the partitions kept the
// markers and later batches: without this test the decided transaction
// could never complete, and its id answered CONCURRENT_TRANSACTIONS for
// ever.
func markerSettled(p *Partition, pid int64, epoch int16, strict bool) (bool, error) {
	stored, open, err := p.producerTxn(pid)
	if err != nil {
		return false, err
	}
	return stored > epoch || (strict && stored == epoch && open), nil
}

// producerSpan is what the partitions hold of one producer id: its highest
// epoch and the partitions where it has a transaction open.
type producerSpan struct {
	maxEpoch int16
	open     []TopicPartition
}

// spanOf collects pid's producerSpan over every partition but the
// coordinator's own log.
func (c *Coordinator) spanOf(pid int64) (producerSpan, error) {
	s := producerSpan{maxEpoch: -1}
	for _, p := range c.e.Partitions() {
		if p == c.log {
			continue
		}
		epoch, open, err := p.producerTxn(pid)
		if err != nil {
			return s, err
		}
		s.maxEpoch = max(s.maxEpoch, epoch)
		if open {
			s.open = append(s.open, TopicPartition{Topic: p.topic, Partition: int32(p.index)})
		}
	}
	return s, nil
}

// The state log may have lost its unsynced tail in a machine crash while
// the partitions kept later batches and markers: under SyncAlways only
// records that nothing acknowledged depends on (docs/ARCHITECTURE.md,
// "Transactions across a power cut"); under the other policies any tail
// the last sync did not cover. Recovery brings each id's state up to what
// the partitions hold, in two steps, one before the orphan sweep and one
// after it (under mu).

// fenceUnlisted aborts, with a fence, every Ongoing transaction that
// cannot be committed as recorded: one with batches in a partition its
// record does not list (a lost AddPartitions record: its commit would
// skip that partition), or whose producer id the partitions know at a
// higher epoch (the record is stale: its end, and later ones, were lost,
// and what is open is a later transaction). The abort covers every
// partition where the producer id has a transaction open; where the
// partition is past the fence's epoch, markerSettled skips it and the
// orphan sweep that follows ends what is open there. A consistent Ongoing
// transaction is left to its producer, a fence or its timeout.
func (c *Coordinator) fenceUnlisted() {
	for _, id := range c.sortedIDs() {
		m := c.txns[id]
		if m.state != TxnOngoing {
			continue
		}
		span, err := c.spanOf(m.pid)
		if err != nil {
			continue // a full producer table: the sweep's retries end what stays open
		}
		next := *m
		next.partitions = append([]TopicPartition(nil), m.partitions...)
		unlisted := false
		for _, tp := range span.open {
			if !containsTP(next.partitions, tp) {
				next.partitions = append(next.partitions, tp)
				unlisted = true
			}
		}
		if !unlisted && span.maxEpoch <= m.epoch {
			continue
		}
		c.txns[id] = &next
		// A failure leaves it decided (stuckDecided, retried) or, if the
		// decision was not written, Ongoing at the raised epoch with every
		// partition listed, for a fence or its timeout to end.
		_ = c.endLocked(&next, false, true, next.tv2)
	}
}

// raiseToPartitions gives an id at rest (Empty, CompleteCommit,
// CompleteAbort) whose producer id the partitions know at a higher epoch
// that epoch, durably, so that the next InitProducerID hands out one above
// it: otherwise the new instance's batches were refused as fenced (epoch
// below the partition's) until it had been initialised as often as
// records were lost. It runs after the orphan sweep, which decides by the
// recorded state (committedEpoch), not the raised one.
func (c *Coordinator) raiseToPartitions() {
	for _, id := range c.sortedIDs() {
		m := c.txns[id]
		switch m.state {
		case TxnEmpty, TxnCompleteCommit, TxnCompleteAbort:
		default:
			continue
		}
		span, err := c.spanOf(m.pid)
		if err != nil || span.maxEpoch <= m.epoch {
			continue
		}
		next := *m
		next.epoch, next.lastEpoch = span.maxEpoch, -1
		if c.persist(&next, true) == nil {
			c.txns[id] = &next
		}
	}
}

// sortedIDs returns the transactional ids in a fixed order, so that
// recovery writes its records in the same order on every run.
func (c *Coordinator) sortedIDs() []string {
	ids := make([]string, 0, len(c.txns))
	for id := range c.txns {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
