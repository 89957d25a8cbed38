package engine

import (
	"fmt"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/partition"
	"github.com/idemlog/idemlog/txnindex"
)

// Isolation is a consumer's isolation level.
type Isolation int

const (
	// ReadUncommitted sees everything below the high watermark, including
	// open and aborted transactions.
	ReadUncommitted Isolation = iota
	// ReadCommitted sees records below the last stable offset, without
	// aborted transactions and without control batches.
	ReadCommitted
)

// Consumer reads partitions in order for a consumer group, at an isolation
// level, and commits its positions as the group's offsets. Not safe for
// concurrent use.
type Consumer struct {
	e         *Engine
	group     string
	isolation Isolation
	positions map[*Partition]int64

	dec     batch.Decoder
	filter  txnindex.Filter
	aborted []txnindex.Entry
}

// NewConsumer returns a consumer for group (may be "" for a consumer that
// never commits).
func (e *Engine) NewConsumer(group string, isolation Isolation) *Consumer {
	return &Consumer{e: e, group: group, isolation: isolation, positions: map[*Partition]int64{}}
}

// Assign starts reading p at the group's committed offset (waiting for
// no transaction: a pending transactional commit gives
// ErrUnstableOffsetCommit, retry later), or at the log start.
func (c *Consumer) Assign(p *Partition) error {
	pos := p.log.LogStartOffset()
	if c.group != "" {
		tp := TopicPartition{Topic: p.topic, Partition: int32(p.index)}
		offs, err := c.e.fetchOffsets(c.group, []TopicPartition{tp}, c.isolation == ReadCommitted)
		if err != nil {
			return err
		}
		if o := offs[tp].Offset; o >= 0 {
			pos = max(o, pos)
		}
	}
	c.positions[p] = pos
	return nil
}

// Position returns the next offset the consumer reads from p.
func (c *Consumer) Position(p *Partition) int64 { return c.positions[p] }

// Seek assigns p at offset: the next Poll reads from there. It is for a
// consumer whose positions live outside the group's committed offsets (in
// the database its effects go to, package sink), and for going back to the
// last position such a store holds after its transaction rolled back. An
// offset outside the log makes the next Poll fail with
// partition.ErrOffsetOutOfRange; nothing is checked here, so that the
// error comes with the read that would have used the offset.
func (c *Consumer) Seek(p *Partition, offset int64) { c.positions[p] = offset }

// Poll reads the next batches of p (up to about maxBytes) and calls fn for
// every record the isolation level shows, in offset order, then advances
// the position past them. It returns how many records fn saw. The record's
// key and value are valid only during the call.
func (c *Consumer) Poll(p *Partition, maxBytes int, fn func(r *batch.Record) error) (int, error) {
	pos, ok := c.positions[p]
	if !ok {
		return 0, fmt.Errorf("cannot poll %s-%d: not assigned", p.topic, p.index)
	}
	var ch struct{ partition.Chunk }
	var err error
	if c.isolation == ReadCommitted {
		ch.Chunk, c.aborted, err = p.ReadCommitted(pos, maxBytes, c.aborted[:0])
		c.filter.Reset(c.aborted)
	} else {
		ch.Chunk, err = p.log.Read(pos, maxBytes)
		err = p.gone(err)
	}
	if err != nil {
		return 0, err
	}
	defer ch.Release()
	seen := 0
	batches := batch.NewIter(ch.Data)
	for batches.Next() {
		b := batches.Batch()
		if c.skip(b) {
			continue
		}
		it, err := c.dec.Records(b)
		if err != nil {
			return seen, err
		}
		var r batch.Record
		for it.Next(&r) {
			if r.Offset < pos {
				// The position can lie inside the first batch (a log
				// start or committed offset mid-batch): its earlier
				// records are not the consumer's, as Kafka's consumer
				// drops them.
				continue
			}
			if err := fn(&r); err != nil {
				return seen, err
			}
			seen++
		}
		if err := it.Err(); err != nil {
			return seen, err
		}
	}
	if err := batches.Err(); err != nil {
		return seen, err
	}
	c.positions[p] = ch.NextOffset
	return seen, nil
}

// skip reports whether the isolation level hides b.
func (c *Consumer) skip(b batch.Batch) bool {
	if c.isolation != ReadCommitted {
		return b.IsControl()
	}
	abort := false
	if b.IsControl() && b.RecordsCount() > 0 {
		if ctl, err := b.Control(); err == nil {
			abort = ctl.Type == batch.ControlAbort
		}
	}
	return c.filter.Skip(txnindex.Batch{ProducerID: b.ProducerID(), LastOffset: b.LastOffset(),
		Transactional: b.IsTransactional(), Control: b.IsControl(), AbortMarker: abort})
}

// Commit stores the consumer's positions as the group's committed offsets
// (outside any transaction: consume-process-produce pipelines use
// TransactionalProducer.SendOffsets instead).
//
// Positions in partitions deleted since are left out: their committed
// offsets went with the topic, and a topic created anew under the name
// starts without any. (Without this: they came back, and the new topic's
// consumers skipped its first records.)
func (c *Consumer) Commit() error {
	offs := make(map[TopicPartition]OffsetAndMetadata, len(c.positions))
	for p, pos := range c.positions {
		if p.deleted.Load() {
			continue
		}
		offs[TopicPartition{Topic: p.topic, Partition: int32(p.index)}] = OffsetAndMetadata{Offset: pos}
	}
	if len(offs) == 0 {
		return nil
	}
	return c.e.commitOffsets(c.group, offs, true)
}
