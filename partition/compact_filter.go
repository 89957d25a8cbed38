package partition

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/txnindex"
)

// txnMeta follows transactions through a walk in offset order (Kafka's
// CleanedTransactionMetadata): which data batches belong to aborted
// transactions, which markers may go, and the aborted-transaction index
// entries the new segment keeps.
type txnMeta struct {
	aborted []txnindex.Entry // by FirstOffset, not yet reached
	next    int
	// ongoingAborted: producers inside an aborted transaction, with
	// whether a batch of it was read in this walk.
	ongoingAborted map[int64]*abortedTxn
	// ongoingCommitted: producers with a transactional batch read since
	// their last marker.
	ongoingCommitted map[int64]bool
	// kept collects the entries of the aborted transactions whose ABORT
	// marker stays (a batch of theirs was read).
	kept []txnindex.Entry
}

type abortedTxn struct {
	e        txnindex.Entry
	observed bool
}

// newTxnMeta takes the aborted transactions of the walk's range, in any
// order and possibly repeated (collected segment by segment).
func newTxnMeta(aborted []txnindex.Entry) *txnMeta {
	sort.Slice(aborted, func(i, j int) bool {
		if aborted[i].FirstOffset != aborted[j].FirstOffset {
			return aborted[i].FirstOffset < aborted[j].FirstOffset
		}
		return aborted[i].ProducerID < aborted[j].ProducerID
	})
	out := aborted[:0]
	for i, e := range aborted {
		if i > 0 && e == aborted[i-1] {
			continue
		}
		out = append(out, e)
	}
	return &txnMeta{aborted: out, ongoingAborted: map[int64]*abortedTxn{}, ongoingCommitted: map[int64]bool{}}
}

// reach moves the aborted transactions that start at or below offset to
// ongoingAborted.
func (t *txnMeta) reach(offset int64) {
	for t.next < len(t.aborted) && t.aborted[t.next].FirstOffset <= offset {
		e := t.aborted[t.next]
		t.ongoingAborted[e.ProducerID] = &abortedTxn{e: e}
		t.next++
	}
}

// onData reads a data batch and reports whether it is aborted data (to
// be removed whatever its keys).
func (t *txnMeta) onData(b batch.Batch) bool {
	t.reach(b.LastOffset())
	if !b.IsTransactional() {
		return false
	}
	if a, ok := t.ongoingAborted[b.ProducerID()]; ok {
		a.observed = true
		return true
	}
	t.ongoingCommitted[b.ProducerID()] = true
	return false
}

// onControl reads a control batch and reports whether it may be discarded
// once its delete horizon passed: an ABORT marker none of whose
// transaction's batches was read, a COMMIT marker with no transactional
// batch of its producer read since the previous marker, an empty control
// batch. An ABORT marker that stays has its index entry kept.
func (t *txnMeta) onControl(b batch.Batch) bool {
	t.reach(b.LastOffset())
	if b.RecordsCount() == 0 {
		return true
	}
	ctl, err := b.Control()
	if err != nil {
		return false
	}
	pid := b.ProducerID()
	switch ctl.Type {
	case batch.ControlAbort:
		a, ok := t.ongoingAborted[pid]
		delete(t.ongoingAborted, pid)
		if ok && a.observed {
			t.kept = append(t.kept, a.e)
			return false
		}
		return true
	case batch.ControlCommit:
		had := t.ongoingCommitted[pid]
		delete(t.ongoingCommitted, pid)
		return !had
	}
	return false
}

// protects reports whether b is the batch that keeps its producer's state
// (kept, emptied if need be): its newest data batch, or, for a producer
// with none, its control batches of the current epoch.
func (c *cleaner) protects(b batch.Batch) bool {
	if !b.HasProducerID() {
		return false
	}
	p, ok := c.protected[b.ProducerID()]
	if !ok {
		return false
	}
	if p.lastData >= 0 {
		return p.lastData == b.LastOffset()
	}
	return b.IsControl() && b.ProducerEpoch() == p.epoch
}

// filterBatch applies the batch and record rules (Kafka's
// checkBatchRetention and shouldRetainRecord) to b and returns the bytes
// to write (nil: the batch goes). upper is the pass's end offset: its
// last batch stays, emptied if need be. The result may alias b or the
// cleaner's buffers, valid until the next call.
func (c *cleaner) filterBatch(b batch.Batch, meta *txnMeta, upper int64) ([]byte, error) {
	var canDiscard bool
	if b.IsControl() {
		canDiscard = meta.onControl(b)
	} else {
		canDiscard = meta.onData(b)
	}
	horizon, hasHorizon := deleteHorizon(b)
	discardRecords := canDiscard
	if b.IsControl() {
		discardRecords = canDiscard && hasHorizon && horizon <= c.now
	}
	retainEmpty := c.protects(b) || b.NextOffset() == upper
	if !b.IsControl() {
		c.stats.RecordsRead += int(b.RecordsCount())
	}
	if discardRecords && !retainEmpty {
		return nil, nil
	}
	// The records: all dropped, or each by its rule.
	var (
		removed, kept int
		tombstones    bool
	)
	if !discardRecords && b.RecordsCount() > 0 {
		it, err := c.dec.Records(b)
		if err != nil {
			return nil, err
		}
		var r batch.Record
		for it.Next(&r) {
			if c.keepRecord(b, &r, horizon, hasHorizon) {
				kept++
				if r.Value == nil && !b.IsControl() {
					tombstones = true
				}
			} else {
				removed++
			}
		}
		if err := it.Err(); err != nil {
			return nil, err
		}
	} else {
		removed = int(b.RecordsCount())
	}
	if !b.IsControl() {
		c.stats.RecordsKept += kept
	}
	if kept == 0 {
		if retainEmpty {
			return c.emptyHeader(b), nil
		}
		return nil, nil
	}
	markerForEmptyTxn := canDiscard && b.IsControl()
	stamp := (tombstones || markerForEmptyTxn) && !hasHorizon
	if removed == 0 && !stamp {
		return b, nil
	}
	if stamp {
		horizon, hasHorizon = c.now+c.cfg.DeleteRetention.Milliseconds(), true
	}
	return c.rebuild(b, horizon, hasHorizon)
}

// keepRecord is the record rule for a record of a batch that is kept.
func (c *cleaner) keepRecord(b batch.Batch, r *batch.Record, horizon int64, hasHorizon bool) bool {
	if b.IsControl() {
		return true
	}
	if r.Offset > c.latest {
		return true
	}
	if r.Key == nil {
		c.stats.Invalid++
		return false
	}
	if r.Offset < c.lookup(r.Key) {
		return false
	}
	// A tombstone stays until its batch's horizon passed; the first pass
	// that copies it stamps one.
	return r.Value != nil || !hasHorizon || c.now < horizon
}

// deleteHorizon returns the delete horizon a batch carries (KIP-534:
// attribute bit 6, the horizon in baseTimestamp).
func deleteHorizon(b batch.Batch) (int64, bool) {
	if b.HasDeleteHorizon() {
		return b.BaseTimestamp(), true
	}
	return 0, false
}

// Header field positions of a v2 batch (the batch package's layout).
const (
	hdrLeaderEpoch    = 12
	hdrCRC            = 17
	hdrAttributes     = 21
	hdrLastOffsetDelt = 23
	hdrBaseTimestamp  = 27
	hdrMaxTimestamp   = 35
	hdrProducerID     = 43
	hdrProducerEpoch  = 51
	hdrBaseSequence   = 53
	hdrRecordsCount   = 57

	attrCodecMask   = 0x07
	attrHasHorizon  = 0x40
	attrKeepInEmpty = 0x08 | 0x10 | 0x20 // timestamp type, transactional, control
)

// emptyHeader returns b as a 61-byte batch without records (Kafka's
// writeEmptyHeader): offsets, producer fields, leader epoch, timestamp
// type, transactional and control bits and maxTimestamp kept; no codec,
// no horizon, baseTimestamp -1.
func (c *cleaner) emptyHeader(b batch.Batch) []byte {
	h := append(c.out[:0], b[:batch.HeaderSize]...)
	be := binary.BigEndian
	be.PutUint32(h[8:], uint32(batch.HeaderSize-batch.LogOverhead))
	attrs := be.Uint16(h[hdrAttributes:]) & attrKeepInEmpty
	be.PutUint16(h[hdrAttributes:], attrs)
	be.PutUint64(h[hdrBaseTimestamp:], math.MaxUint64) // -1
	be.PutUint32(h[hdrRecordsCount:], 0)
	be.PutUint32(h[hdrCRC:], batch.Batch(h).ComputeCRC())
	c.out = h
	return h
}

// filler returns an empty batch covering offsets [from, to] that no kept
// batch holds: no producer, no records, no timestamps. A cleaned segment
// has no gap between its batches (see the package doc, Compaction), so
// that recovery, which reads a gap as the end of the data, reads it whole.
func filler(dst []byte, from, to int64) []byte {
	h := dst[:0]
	h = append(h, make([]byte, batch.HeaderSize)...)
	be := binary.BigEndian
	be.PutUint64(h[0:], uint64(from))
	be.PutUint32(h[8:], uint32(batch.HeaderSize-batch.LogOverhead))
	be.PutUint32(h[hdrLeaderEpoch:], math.MaxUint32)
	h[16] = batch.Magic
	be.PutUint32(h[hdrLastOffsetDelt:], uint32(to-from))
	be.PutUint64(h[hdrBaseTimestamp:], math.MaxUint64)
	be.PutUint64(h[hdrMaxTimestamp:], math.MaxUint64)
	be.PutUint64(h[hdrProducerID:], math.MaxUint64)
	be.PutUint16(h[hdrProducerEpoch:], math.MaxUint16)
	be.PutUint32(h[hdrBaseSequence:], math.MaxUint32)
	be.PutUint32(h[hdrCRC:], batch.Batch(h).ComputeCRC())
	return h
}

// rebuild writes the kept records of b into a new batch (Kafka's
// buildRetainedRecordsInto): same base and last offset, producer fields,
// leader epoch, attributes and codec (at its default level); each kept
// record at its offset and timestamp. baseTimestamp is the horizon when
// there is one (bit 6 set), else the first kept record's timestamp;
// maxTimestamp the kept records' largest (the original under
// LogAppendTime).
func (c *cleaner) rebuild(b batch.Batch, horizon int64, hasHorizon bool) ([]byte, error) {
	if c.builder == nil {
		c.builder = batch.NewBuilder(batch.CodecNone)
	}
	bl := c.builder
	bl.Reset(b.Codec())
	bl.SetProducer(b.ProducerID(), b.ProducerEpoch(), b.BaseSequence())
	bl.SetTransactional(b.IsTransactional())
	it, err := c.dec.Records(b)
	if err != nil {
		return nil, err
	}
	var r batch.Record
	base, maxTs, first := int64(0), int64(-1), true
	for it.Next(&r) {
		if !c.keepRecord(b, &r, horizon, hasHorizon) {
			continue
		}
		if first {
			base, first = r.Timestamp, false
			if hasHorizon {
				base = horizon
			}
		}
		maxTs = max(maxTs, r.Timestamp)
		c.headers = c.headers[:0]
		hs := r.Headers()
		var h batch.Header
		for hs.Next(&h) {
			c.headers = append(c.headers, h)
		}
		bl.AppendAt(r.OffsetDelta, r.Timestamp-base, r.Key, r.Value, c.headers)
	}
	if err := it.Err(); err != nil {
		return nil, err
	}
	out, err := bl.Build()
	if err != nil {
		return nil, fmt.Errorf("cannot rebuild batch at offset %d: %w", b.BaseOffset(), err)
	}
	be := binary.BigEndian
	copy(out[0:8], b[0:8])
	copy(out[hdrLeaderEpoch:hdrLeaderEpoch+4], b[hdrLeaderEpoch:hdrLeaderEpoch+4])
	attrs := be.Uint16(b[hdrAttributes:]) &^ attrHasHorizon
	if hasHorizon {
		attrs |= attrHasHorizon
	}
	be.PutUint16(out[hdrAttributes:], attrs)
	be.PutUint32(out[hdrLastOffsetDelt:], uint32(b.LastOffsetDelta()))
	be.PutUint64(out[hdrBaseTimestamp:], uint64(base))
	if b.LogAppendTime() {
		maxTs = b.MaxTimestamp()
	}
	be.PutUint64(out[hdrMaxTimestamp:], uint64(maxTs))
	be.PutUint32(out[hdrCRC:], out.ComputeCRC())
	return out, nil
}
