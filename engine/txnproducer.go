package engine

import (
	"errors"
	"fmt"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/producer"
)

// TransactionalProducer writes to many partitions atomically: the batches
// it sends between two ends of a transaction become visible to
// read_committed readers together (Commit) or never (Abort). A second
// instance with the same transactional id fences it: its writes then fail
// with PRODUCER_FENCED (INVALID_PRODUCER_EPOCH for a partition already in
// its open transaction) and its Commit and Abort with PRODUCER_FENCED.
//
// It follows transaction version 2: a partition joins the transaction at
// its first write, and every Commit or Abort bumps the epoch (at the last
// epoch it moves to a new producer id, see ID). Not safe for
// concurrent use; one instance per goroutine, as with Kafka's producer.
type TransactionalProducer struct {
	c     *Coordinator
	id    string
	pid   int64
	epoch int16
	seqs  map[*Partition]int32
	added map[*Partition]bool
	// failed is the error of a Send or SendOffsets of the current
	// transaction: until Abort, Commit refuses (Kafka's abortable error
	// state), and a fencing error refuses everything (fatal). (Without
	// this: Commit after a failed Send committed the rest, the input
	// offsets of output never written among it.)
	failed error
}

// NewTransactionalProducer initializes the transactional id (fencing any
// earlier instance, aborting its open transaction) and returns a producer.
func (e *Engine) NewTransactionalProducer(id string, timeout time.Duration) (*TransactionalProducer, error) {
	c, err := e.coordinator()
	if err != nil {
		return nil, err
	}
	var pid int64
	var epoch int16
	for range 3 {
		pid, epoch, err = c.InitProducerID(id, timeout)
		if !errors.Is(err, ErrConcurrentTransactions) {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	return &TransactionalProducer{c: c, id: id, pid: pid, epoch: epoch,
		seqs: map[*Partition]int32{}, added: map[*Partition]bool{}}, nil
}

// ID returns the producer id and current epoch; both can change at each
// Commit or Abort.
func (tp *TransactionalProducer) ID() (int64, int16) { return tp.pid, tp.epoch }

// Send writes the records in bld to p inside the current transaction. A
// failure leaves the transaction to be aborted: Commit refuses until
// Abort (with a fencing error, everything refuses). As with Producer.Send,
// bld is cleared once the batch is written.
func (tp *TransactionalProducer) Send(p *Partition, bld *batch.Builder) (AppendResult, error) {
	if err := tp.usable(); err != nil {
		return AppendResult{}, err
	}
	if !tp.added[p] {
		ref := TopicPartition{Topic: p.topic, Partition: int32(p.index)}
		if err := tp.c.AddPartitions(tp.id, tp.pid, tp.epoch, []TopicPartition{ref}, true); err != nil {
			tp.failed = err
			return AppendResult{}, err
		}
		tp.added[p] = true
	}
	bld.SetProducer(tp.pid, tp.epoch, tp.seqs[p])
	bld.SetTransactional(true)
	b, err := bld.Build()
	if err != nil {
		return AppendResult{}, err // nothing was sent
	}
	res, err := p.appendWait(b, writeOpts{built: true})
	if err != nil {
		tp.failed = err
		return AppendResult{}, fmt.Errorf("cannot send in transaction %q: %w", tp.id, err)
	}
	tp.seqs[p] = batch.NextSequence(b.LastSequence())
	bld.Clear()
	return res, nil
}

// Commit makes the transaction's writes visible, atomically. With nothing
// written since the last Commit or Abort there is nothing to commit: it
// returns nil at once, as Kafka's client completes an empty transaction
// without asking the coordinator (a consume-process-produce loop whose
// poll came back empty commits nothing).
func (tp *TransactionalProducer) Commit() error {
	if err := tp.usable(); err != nil {
		return err
	}
	if len(tp.added) == 0 {
		return nil
	}
	return tp.end(true)
}

// Abort discards the transaction's writes. With nothing written it only
// bumps the epoch (an empty abort, no markers). It is the way out of a
// failed Send's state; a fenced producer's Abort is refused by the
// coordinator.
func (tp *TransactionalProducer) Abort() error {
	if err := tp.end(false); err != nil {
		return err
	}
	tp.failed = nil
	return nil
}

// usable refuses calls after a failure of the current transaction: every
// call once fenced (a newer instance owns the id), and Send, SendOffsets
// and Commit until Abort otherwise.
func (tp *TransactionalProducer) usable() error {
	switch {
	case tp.failed == nil:
		return nil
	case errors.Is(tp.failed, producer.ErrInvalidProducerEpoch) || errors.Is(tp.failed, ErrProducerFenced):
		return fmt.Errorf("transaction %q: %w: %w", tp.id, ErrProducerFenced, tp.failed)
	default:
		return fmt.Errorf("transaction %q must be aborted after: %w", tp.id, tp.failed)
	}
}

func (tp *TransactionalProducer) end(commit bool) error {
	var pid int64
	var epoch int16
	var err error
	for range 3 {
		pid, epoch, err = tp.c.endTxn(tp.id, tp.pid, tp.epoch, commit, true)
		// CONCURRENT_TRANSACTIONS: an earlier attempt's decision is being
		// completed; the retry finds it done.
		if !errors.Is(err, ErrConcurrentTransactions) {
			break
		}
	}
	if err != nil {
		if errors.Is(err, ErrProducerFenced) || errors.Is(err, producer.ErrInvalidProducerEpoch) {
			// Fatal, as Kafka's producer makes it: every call from now
			// on reports the fence. (Without this: a fence learnt here
			// left an earlier abortable error in place, which asked for
			// an Abort that the coordinator refuses, for ever.)
			tp.failed = err
		}
		return err
	}
	if pid != tp.pid || epoch != tp.epoch {
		// A new epoch, or a new producer id after the epochs ran out,
		// restarts every partition's sequence at 0.
		clear(tp.seqs)
	}
	tp.pid, tp.epoch = pid, epoch
	clear(tp.added)
	return nil
}

// SendOffsets commits a consumer group's input offsets inside the current
// transaction (consume-process-produce): they become the group's committed
// offsets if and only if the transaction commits. The group's
// __consumer_offsets partition joins the transaction, as Kafka's
// AddOffsetsToTxn does.
func (tp *TransactionalProducer) SendOffsets(group string, offsets map[TopicPartition]OffsetAndMetadata) (err error) {
	if err := tp.usable(); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tp.failed = err
		}
	}()
	e := tp.c.e
	if _, err := e.offsets(); err != nil { // creates the internal topic on first use
		return err
	}
	p, err := e.Partition(ConsumerOffsetsTopic, groupPartition(group))
	if err != nil {
		return err
	}
	if !tp.added[p] {
		ref := TopicPartition{Topic: ConsumerOffsetsTopic, Partition: int32(groupPartition(group))}
		if err := tp.c.AddPartitions(tp.id, tp.pid, tp.epoch, []TopicPartition{ref}, true); err != nil {
			return err
		}
		tp.added[p] = true
	}
	return tp.c.TxnCommitOffsets(tp.id, group, tp.pid, tp.epoch, offsets)
}
