package engine

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/errcode"
	"github.com/idemlog/idemlog/segment"
)

// MaxInFlight is how many batches a Producer lets await acknowledgement per
// partition: the broker remembers 5 batches per producer, so any batch the
// producer may retry is still recognised as a duplicate.
const MaxInFlight = 5

// Producer is an idempotent producer: it owns a producer id and epoch and
// numbers its batches per partition, so that a retried batch is never
// written twice. It is safe for concurrent use; batches to one partition
// are written in the order their sequences were assigned.
type Producer struct {
	e     *Engine
	pid   int64
	epoch int16
	// Retries is how many times a batch is resent after a retriable error
	// (a full disk) before Send gives up; Backoff is the pause between.
	Retries int
	Backoff time.Duration

	mu    sync.Mutex
	parts map[*Partition]*producerPartition
}

type producerPartition struct {
	// mu orders sequence assignment with the write, so that batches reach
	// the log in sequence order.
	mu       sync.Mutex
	next     int32
	inFlight chan struct{}
}

// NewProducer returns an idempotent producer with a fresh producer id.
func (e *Engine) NewProducer() (*Producer, error) {
	pid, epoch, err := e.initProducerID()
	if err != nil {
		return nil, err
	}
	return &Producer{e: e, pid: pid, epoch: epoch, Retries: 10, Backoff: 10 * time.Millisecond,
		parts: map[*Partition]*producerPartition{}}, nil
}

// ID returns the producer id and epoch.
func (pr *Producer) ID() (int64, int16) { return pr.pid, pr.epoch }

func (pr *Producer) partition(p *Partition) *producerPartition {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pp := pr.parts[p]
	if pp == nil {
		pp = &producerPartition{inFlight: make(chan struct{}, MaxInFlight)}
		pr.parts[p] = pp
	}
	return pp
}

// Send seals the records in bld as the producer's next batch for p and
// appends it, resending the same bytes after a retriable failure. It
// returns once the partition's sync policy acknowledges the batch.
//
// Once the batch is written, bld is cleared (batch.Builder.Clear): the
// records appended to it next make the next batch, and a record is never
// sent twice by reusing the builder. After a failure nothing was written
// and bld keeps its records, for a retry.
func (pr *Producer) Send(p *Partition, bld *batch.Builder) (AppendResult, error) {
	pp := pr.partition(p)
	pp.inFlight <- struct{}{}
	defer func() { <-pp.inFlight }()

	pp.mu.Lock()
	seq := pp.next
	bld.SetProducer(pr.pid, pr.epoch, seq)
	// A builder set up for a TransactionalProducer and reused would open a
	// partition transaction no coordinator knows, pinning the last stable
	// offset for good.
	bld.SetTransactional(false)
	b, err := bld.Build()
	if err != nil {
		pp.mu.Unlock()
		return AppendResult{}, err
	}
	var res AppendResult
	var wait bool
	for attempt := 0; ; attempt++ {
		res, wait, err = p.write(b, writeOpts{built: true})
		if err == nil || !retriable(err) || attempt >= pr.Retries {
			break
		}
		time.Sleep(pr.Backoff)
	}
	if err == nil {
		pp.next = batch.NextSequence(b.LastSequence())
		bld.Clear()
	}
	// On failure nothing was written (the engine writes all or nothing), so
	// the sequence is reused by the next batch.
	pp.mu.Unlock()
	if err != nil {
		return AppendResult{}, fmt.Errorf("cannot send producer %d batch %d to %s-%d: %w", pr.pid, seq, p.topic, p.index, p.gone(err))
	}
	if wait {
		if err := p.log.WaitDurable(res.LastOffset + 1); err != nil {
			return AppendResult{}, p.gone(err)
		}
	}
	return res, nil
}

// retriable reports whether resending the same batch may succeed.
func retriable(err error) bool {
	return errors.Is(err, segment.ErrNoSpace) && errcode.Code(err) == errcode.KafkaStorageError
}
