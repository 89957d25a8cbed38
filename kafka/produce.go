package kafka

// Produce (key 0), versions 3-11 (listed from 0): each partition's record
// batch appended as the client built it (idempotent and transactional
// producers checked by the engine), acks 0, 1 and -1, the durability wait
// overlapping the requests pipelined behind.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/errcode"
	"github.com/idemlog/idemlog/pidtable"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// produce appends each partition's record batch as the client built it:
// the engine validates it (length, magic 2, CRC-32C, sequence, epoch) and
// stamps the base offset in its copy in the segment, never re-encoding.
// Every partition is appended before any durability wait, so a request's
// partitions share their syncs' time; the waits run in the connection's
// writer (pending.finish), overlapping the requests pipelined behind.
func (s *Server) produce(r *kmsg.ProduceRequest) pending {
	start := time.Now()
	resp := r.ResponseKind().(*kmsg.ProduceResponse)
	var reqErr error
	if r.Acks != -1 && r.Acks != 0 && r.Acks != 1 {
		reqErr = ErrInvalidRequiredAcks
	}
	txnPID := int64(-1)
	if reqErr == nil {
		txnPID, reqErr = transactionalProducer(r)
	}
	// waits are the partitions still owed their sync; slots[i] is the
	// response entry of waits[i].
	var waits []engine.DurableWait
	var slots []*kmsg.ProduceResponseTopicPartition
	for ti := range r.Topics {
		rt := &r.Topics[ti]
		t := kmsg.NewProduceResponseTopic()
		t.Topic = rt.Topic
		t.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		resp.Topics = append(resp.Topics, t)
		for pi := range rt.Partitions {
			rp := &rt.Partitions[pi]
			out := &resp.Topics[len(resp.Topics)-1].Partitions[pi]
			*out = kmsg.NewProduceResponseTopicPartition()
			out.Partition = rp.Partition
			out.LogAppendTime = -1
			err := reqErr
			var p *engine.Partition
			if err == nil {
				var recs []byte
				if recs, err = checkProduceRecords(r.Version, rp.Records); err == nil {
					rp.Records = recs // less a partial tail, trimmed as Kafka does
				}
			}
			if err == nil && engine.IsInternalTopic(rt.Topic) {
				// Only the engine writes the internal topics: a client's
				// record in __consumer_offsets would be replayed as a
				// group's committed offset. (Kafka's appendToLocalLog.)
				err = fmt.Errorf("cannot produce to internal topic %q: %w", rt.Topic, engine.ErrInvalidTopic)
			}
			if err == nil {
				p, err = s.eng.Partition(rt.Topic, int(rp.Partition))
			}
			// A transactional batch is verified (KIP-890 part 1): one that
			// would open a transaction in the partition only with a token
			// taken before the coordinator's check and still valid at the
			// append (engine/verify.go); one that continues an open
			// transaction needs none, but fails the same way if that
			// transaction ended in between.
			verified := false
			var ver engine.Verification
			if b := batch.Batch(rp.Records); err == nil && txnPID >= 0 && len(b) >= batch.HeaderSize && b.IsTransactional() {
				verified = true
				if !s.eng.Frontend().TxnOpen(p, txnPID, b.ProducerEpoch()) {
					ver = s.eng.Frontend().BeginVerification(p, txnPID)
					err = s.coord.Verify(*r.TransactionID, txnPID, b.ProducerEpoch(),
						engine.TopicPartition{Topic: rt.Topic, Partition: rp.Partition})
				}
			}
			if err == nil {
				var res engine.AppendResult
				var wait bool
				if verified {
					res, wait, err = s.eng.Frontend().AppendNoWaitVerified(p, rp.Records, ver)
				} else {
					res, wait, err = s.eng.Frontend().AppendNoWait(p, rp.Records)
				}
				if err == nil {
					out.BaseOffset = res.BaseOffset
					out.LogAppendTime = res.LogAppendTime
					out.LogStartOffset = p.LogStartOffset()
					s.m.recordsIn.Add(float64(res.LastOffset - res.BaseOffset + 1))
					if wait {
						waits = append(waits, engine.DurableWait{P: p, End: res.LastOffset + 1})
						slots = append(slots, out)
					}
				}
			}
			if err != nil {
				s.produceFailed(out, r.Version, err)
			}
		}
	}
	if r.Acks == 0 {
		// No response at all; a wait would only delay the next request's.
		// A failure closes the connection instead, as Kafka does: the
		// producer, told nothing, notices and refreshes its metadata.
		for _, t := range resp.Topics {
			for _, pt := range t.Partitions {
				if pt.ErrorCode != 0 {
					return pending{closeAfter: true}
				}
			}
		}
		return pending{}
	}
	p := pending{resp: resp}
	p.finish = func() {
		// The partitions' syncs run side by side: a request over N
		// partitions under fsync always waits about one sync, not N.
		s.eng.Frontend().WaitAll(waits)
		for i, w := range waits {
			if w.Err != nil {
				s.produceFailed(slots[i], r.Version, w.Err)
			}
		}
		s.m.appendLatency.Observe(time.Since(start).Seconds())
	}
	return p
}

// transactionalProducer checks a transactional produce: one transactional
// producer per request (Kafka's rule), whose id is the request's
// transactional id. It returns that producer's id, or -1 when the request
// carries no transactional batch. Each partition must hold exactly one
// batch (v3+), which the engine checks; here only the header is read.
func transactionalProducer(r *kmsg.ProduceRequest) (int64, error) {
	pid := int64(-1)
	for ti := range r.Topics {
		for _, rp := range r.Topics[ti].Partitions {
			b := batch.Batch(rp.Records)
			if len(b) < batch.HeaderSize || !b.IsTransactional() {
				continue
			}
			if pid >= 0 && b.ProducerID() != pid {
				return -1, engine.ErrInvalidProducerIDMapping
			}
			pid = b.ProducerID()
		}
	}
	// Transactional records without a transactional id: Kafka's
	// handleProduceRequest refuses the whole request as not authorized
	// for the (absent) id. (Without this: 49 was answered.)
	if pid >= 0 && r.TransactionID == nil {
		return -1, errTxnIDAuthorization
	}
	if pid >= 0 && *r.TransactionID == "" {
		return -1, engine.ErrInvalidProducerIDMapping
	}
	return pid, nil
}

var (
	errTxnIDAuthorization = errcode.New(kerr.TransactionalIDAuthorizationFailed.Code, "transactional records without a transactional id")
	errNotOneBatch        = errcode.New(kerr.InvalidRecord.Code, "produce v3+ takes exactly one record batch of magic 2 per partition")
	errCorruptFrame       = errcode.New(kerr.CorruptMessage.Code, "records whose framing is corrupt (length below 14 or magic outside 0-2)")
	errZstdBeforeV7       = errcode.New(kerr.UnsupportedCompressionType.Code, "produce before v7 may not use zstd")
)

// checkProduceRecords is Kafka's ProduceRequest.validateRecords for one
// partition: exactly one batch, of magic 2, and no zstd before v7 (KIP-110:
// older consumers could not read it), with Kafka's batch iterator
// (kafkaFrame) deciding what a batch is. INVALID_RECORD is not retriable
// where CORRUPT_MESSAGE is: a client would resend what can never succeed.
// What the iterator itself throws on (a length below 14, a
// magic outside 0-2) is CORRUPT_MESSAGE.
//
// It returns the records to append: recs, less a partial frame after the
// batch, which the iterator does not see and Kafka's log append trims
// (UnifiedLog.trimInvalidBytes), answering success for the batch.
func checkProduceRecords(version int16, recs []byte) ([]byte, error) {
	kind, n := kafkaFrame(recs)
	switch kind {
	case framePartial:
		return nil, errNotOneBatch // no batch at all
	case frameCorrupt:
		return nil, errCorruptFrame
	}
	if batch.Batch(recs).Magic() != batch.Magic {
		return nil, errNotOneBatch
	}
	if version < 7 && batch.Batch(recs[:n]).Codec() == batch.CodecZstd {
		return nil, errZstdBeforeV7
	}
	if n == len(recs) {
		return recs, nil
	}
	switch kind, _ := kafkaFrame(recs[n:]); kind {
	case frameWhole:
		return nil, errNotOneBatch // a second batch, whatever its size
	case frameCorrupt:
		return nil, errCorruptFrame
	}
	return recs[:n], nil
}

// frameKind is what Kafka's batch iterator makes of the bytes at a
// position.
type frameKind int

const (
	framePartial frameKind = iota // a frame cut short: the iteration ends quietly
	frameCorrupt                  // the iterator throws CorruptRecordException
	frameWhole                    // a complete frame: a batch to the iterator
)

// kafkaFrame classifies b as ByteBufferLogInputStream.nextBatch does, in
// its order: fewer than 12 bytes (offset and length) is partial; a length
// below 14 (LegacyRecord's smallest record) is corrupt; fewer than 17
// bytes (up to the magic) is partial; a magic outside 0-2 is corrupt;
// fewer bytes than the length announces is partial; otherwise it is a
// whole frame of n bytes, whatever its magic or size (the checks of the
// batch itself come later).
func kafkaFrame(b []byte) (kind frameKind, n int) {
	const lengthEnd, magicEnd, minLength = 12, 17, 14
	if len(b) < lengthEnd {
		return framePartial, 0
	}
	length := int32(binary.BigEndian.Uint32(b[8:lengthEnd]))
	if length < minLength {
		return frameCorrupt, 0
	}
	if len(b) < magicEnd {
		return framePartial, 0
	}
	if m := int8(b[magicEnd-1]); m < 0 || m > 2 {
		return frameCorrupt, 0
	}
	if size := int64(length) + lengthEnd; int64(len(b)) >= size {
		return frameWhole, int(size)
	}
	return framePartial, 0
}

var (
	errTransactionAbortable = errcode.New(kerr.TransactionAbortable.Code, "transaction abortable")
	errInvalidProducerEpoch = errcode.New(errcode.InvalidProducerEpoch, "invalid producer epoch")
)

// produceFailed answers a partition's failed append. The producer limit's
// error carries its message (v8+): the limit and when it frees, which the
// code alone cannot tell.
func (s *Server) produceFailed(out *kmsg.ProduceResponseTopicPartition, version int16, err error) {
	out.BaseOffset = -1
	out.ErrorCode = s.produceCode(version, err)
	if errors.Is(err, pidtable.ErrTooManyProducers) {
		msg := err.Error()
		out.ErrorMessage = &msg
	}
}

// produceCode is a produce error's code for the request's version: a
// coordinator's PRODUCER_FENCED reaches producers as INVALID_PRODUCER_EPOCH,
// and a partition missing from the transaction is TRANSACTION_ABORTABLE
// from v11 (KIP-890), INVALID_TXN_STATE before.
func (s *Server) produceCode(version int16, err error) int16 {
	switch {
	case errors.Is(err, engine.ErrProducerFenced):
		err = errInvalidProducerEpoch
	case errors.Is(err, engine.ErrInvalidTxnState) && version >= 11:
		err = errTransactionAbortable
	}
	return s.code(kmsg.Produce, err)
}
