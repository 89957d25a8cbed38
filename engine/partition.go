package engine

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/partition"
	"github.com/idemlog/idemlog/pidtable"
	"github.com/idemlog/idemlog/producer"
	"github.com/idemlog/idemlog/txnindex"
)

// Partition is one topic partition: its log and its producers' state.
//
// Appends with a producer id go through the producer's table entry, which
// is locked from the check to the state update: two appends of the same
// producer are serialized (so a batch sent twice at once is written once),
// while appends of different producers lock different entries and meet
// only at the log's writer mutex, held for the copy. The state update runs
// inside that mutex (partition.Log.AppendBatch's callback), so a snapshot,
// taken under the same mutex at a roll, sees state and log agree.
type Partition struct {
	topic   string
	index   int
	topicID [16]byte // set before the partition is published, then fixed
	// internal: one of the engine's own topics (IsInternalTopic), which
	// Append refuses: their records are the engine's state.
	internal bool
	log      *partition.Log
	opts     *Options
	// deleted is set by DeleteTopic before it closes the log, so that
	// operations in flight fail with ErrUnknownTopicOrPartition.
	deleted atomic.Bool
	// engineClosed is the engine's closed flag: set, a closed log means the
	// engine was closed (ErrClosed), not this partition deleted.
	engineClosed *atomic.Bool

	// settings are the topic's configs as the append path reads them: set
	// at open, replaced whole (never modified) by AlterTopicConfig, so a
	// batch is checked against one version of them.
	settings atomic.Pointer[topicSettings]

	producers *producerTable
	txns      *openTxns
	// onMarker, if set (internal topics: the consumer-offsets store, which
	// sets it on first use, possibly while markers are being written), sees
	// every transaction marker, under the writer mutex, after the producer
	// state took it. Atomic: the store publishes it after building itself.
	onMarker atomic.Pointer[markerHook]
	// snap is the snapshot image buffer, used only under the log's writer
	// mutex (the Snapshot callback).
	snap producer.SnapshotWriter
	// verify holds the tokens of transaction verifications (verify.go).
	verify verifier
}

// recordCheckers are the Decoders that check client batches' records
// (write): a compressed batch inflates into one's buffer, kept for
// the next.
var recordCheckers = sync.Pool{New: func() any { return new(batch.Decoder) }}

// markerHook is the type of Partition.onMarker.
type markerHook = func(pid int64, commit bool, offset int64)

// AppendResult is where an appended (or deduplicated) batch is in the log.
type AppendResult struct {
	BaseOffset int64
	LastOffset int64
	// Duplicate is set when the batch repeated one already in the log;
	// the offsets are the original's and nothing was written.
	Duplicate bool
	// LogAppendTime is the time the batch was stamped with on a
	// LogAppendTime topic (for a duplicate, the original's), -1 on a
	// CreateTime topic.
	LogAppendTime int64
	// dupTimestamp is a duplicate's original maxTimestamp.
	dupTimestamp int64
}

// openPartition opens (or creates) a partition. hasID: dir holds a
// partition.metadata, whose id is in p.topicID; otherwise the caller
// assigns one.
func openPartition(dir, topic string, index int, opts *Options, engineClosed *atomic.Bool) (p *Partition, hasID bool, err error) {
	// The producer table is capped only after the load: a rebuild from
	// the log never refuses what the log holds (MaxProducersPerPartition
	// lowered since, say). (Without this: the open failed.)
	p = &Partition{topic: topic, index: index, internal: IsInternalTopic(topic), opts: opts, engineClosed: engineClosed,
		txns: newOpenTxns(), producers: &producerTable{}}
	lopts := opts.Partition
	lopts.Snapshot = p.snapshotImage
	// A partition closed cleanly stays dormant until first used: an idle
	// one costs no descriptor, mapping or goroutine (partition.Options.Lazy).
	lopts.Lazy = true
	cfg, err := openTopicConfig(dir)
	var settings *topicSettings
	if err == nil {
		settings, err = p.settingsFor(&lopts, cfg)
	}
	if err != nil {
		return nil, false, fmt.Errorf("cannot open partition %s-%d: %w", topic, index, err)
	}
	p.settings.Store(settings)
	l, err := partition.Open(dir, lopts)
	if err != nil {
		return nil, false, fmt.Errorf("cannot open partition %s-%d: %w", topic, index, err)
	}
	p.log = l
	// A partition never written has no producer state: its directory's
	// listing, which the log just read, held no snapshot.
	if l.Fresh() {
		p.producers.SetMaxEntries(opts.MaxProducersPerPartition)
		if p.topicID, hasID, err = readPartitionMetadata(dir); err != nil {
			l.Close()
			return nil, false, err
		}
		return p, hasID, nil
	}
	if err := p.loadProducers(dir); err != nil {
		// Not Close: a clean close would have the next open trust the
		// producer state and aborted-transaction index this load did not
		// rebuild.
		l.Abandon()
		return nil, false, err
	}
	// What the replay rebuilt (the aborted-transaction entries of the
	// segments recovery scanned) is synced before the recovery point
	// passes it.
	if err := l.FinishRecovery(); err != nil {
		l.Abandon()
		return nil, false, fmt.Errorf("cannot open partition %s-%d: %w", topic, index, err)
	}
	p.producers.SetMaxEntries(opts.MaxProducersPerPartition)
	if p.topicID, hasID, err = readPartitionMetadata(dir); err != nil {
		l.Close()
		return nil, false, err
	}
	return p, hasID, nil
}

// newPartition opens a partition whose directory createPartitionDirs has
// just made (its topic.config holding cfg, its partition.metadata id):
// from what the creation knows, without reading the directory back. An
// empty log has no producer state to load nor recovery to finish.
func newPartition(dir, topic string, index int, cfg map[string]string, id [16]byte, opts *Options, engineClosed *atomic.Bool) (*Partition, error) {
	p := &Partition{topic: topic, index: index, internal: IsInternalTopic(topic), topicID: id, opts: opts, engineClosed: engineClosed, txns: newOpenTxns(),
		producers: &producerTable{}}
	lopts := opts.Partition
	lopts.Snapshot = p.snapshotImage
	lopts.Lazy = true
	settings, err := p.settingsFor(&lopts, cfg)
	if err != nil {
		return nil, fmt.Errorf("cannot open partition %s-%d: %w", topic, index, err)
	}
	p.settings.Store(settings)
	if p.log, err = partition.OpenEmpty(dir, lopts); err != nil {
		return nil, fmt.Errorf("cannot open partition %s-%d: %w", topic, index, err)
	}
	p.producers.SetMaxEntries(opts.MaxProducersPerPartition)
	return p, nil
}

// HighWatermark is the offset after the last record readers may see.
func (p *Partition) HighWatermark() int64 { return p.log.HighWatermark() }

// LogStartOffset is the first offset still in the log (retention and
// DeleteRecordsBefore move it up).
func (p *Partition) LogStartOffset() int64 { return p.log.LogStartOffset() }

// LogEndOffset is the offset the next append gets. Under
// Options.DurableVisibility it may be above HighWatermark until a sync.
func (p *Partition) LogEndOffset() int64 { return p.log.LogEndOffset() }

// WaitDurable waits until the offsets below end hold the sync policy's
// promise (for SyncAlways: synced to disk). Append waits by itself; this is
// for callers of Frontend.AppendNoWait.
func (p *Partition) WaitDurable(end int64) error { return p.gone(p.log.WaitDurable(end)) }

// Advanced returns a channel closed at the next rise of the partition's
// high watermark, or when the partition is closed or deleted: see
// partition.Log.Advanced, whose use (take the channel, then read the
// state, then wait) it shares. It covers the last stable offset too: that
// moves only with an append (a transaction's first batch, a marker), and
// the append's state change is published before the high watermark moves
// past it (applyMarker and apply run in partition.Log.AppendBatch's
// callback, which precedes the publication).
func (p *Partition) Advanced() <-chan struct{} { return p.log.Advanced() }

// DeleteRecordsBefore is Kafka's DeleteRecords on the partition: the log
// start moves up to offset (-1: the high watermark), the segments wholly
// below it are deleted, and it returns the log start after the call (the
// low watermark). Producer state stays (spec 2.8: since KIP-360 it
// outlives its records). partition.ErrOffsetOutOfRange above the high
// watermark or below -1; ErrInvalidTopic on an internal topic, whose
// records are the engine's state.
func (p *Partition) DeleteRecordsBefore(offset int64) (int64, error) {
	if IsInternalTopic(p.topic) {
		return 0, fmt.Errorf("cannot delete records of internal topic %q: %w", p.topic, ErrInvalidTopic)
	}
	if offset == -1 {
		offset = p.log.HighWatermark()
	}
	if offset < 0 {
		return 0, fmt.Errorf("cannot delete records below offset %d: %w", offset, partition.ErrOffsetOutOfRange)
	}
	if err := p.log.DeleteRecordsBefore(offset); err != nil {
		return 0, p.gone(err)
	}
	return p.log.LogStartOffset(), nil
}

// gone turns a closed log's error into ErrUnknownTopicOrPartition when the
// partition was deleted: what a client retries after a metadata refresh.
func (p *Partition) gone(err error) error {
	if err == nil || !errors.Is(err, partition.ErrClosed) {
		return err
	}
	if p.deleted.Load() {
		return fmt.Errorf("%s-%d was deleted: %w: %w", p.topic, p.index, ErrUnknownTopicOrPartition, err)
	}
	if p.engineClosed != nil && p.engineClosed.Load() {
		// Kafka's listener answers a retriable error for ErrClosed, as a
		// broker that is shutting down does.
		return fmt.Errorf("%s-%d: %w: %w", p.topic, p.index, ErrClosed, err)
	}
	return err
}

// Topic and Index name the partition.
func (p *Partition) Topic() string { return p.topic }
func (p *Partition) Index() int    { return p.index }

// Append validates b as a client produce (Kafka's rules for the batch and,
// for batches with a producer id, for its sequence and epoch) and appends
// it. An exact retry of one of the producer's last five batches returns
// the original offsets and writes nothing. The call returns once the
// partition's sync policy's promise holds for the batch (for a duplicate,
// for the original). A batch whose header max timestamp is not its
// records' largest, or that claims LogAppendTime, is stored corrected (a
// CreateTime batch with its records' largest, CRC resealed), as Kafka's
// validator stores it; b itself is not modified.
func (p *Partition) Append(b []byte) (AppendResult, error) {
	if p.internal {
		return AppendResult{}, fmt.Errorf("cannot append to internal topic %q: %w", p.topic, ErrInternalTopic)
	}
	return p.appendWait(b, writeOpts{})
}

// appendWait is write followed by the wait for the sync policy's promise.
func (p *Partition) appendWait(b []byte, o writeOpts) (AppendResult, error) {
	res, wait, err := p.write(b, o)
	if err != nil {
		return AppendResult{}, p.gone(err)
	}
	if wait {
		if err := p.log.WaitDurable(res.LastOffset + 1); err != nil {
			return AppendResult{}, p.gone(err)
		}
	}
	return res, nil
}

// writeOpts says how write checks a batch. The zero value is a client's
// produce, checked in full.
type writeOpts struct {
	// built: a Producer's Builder sealed the batch in this call, so
	// batch.ValidateBuilt's checks suffice (every check but the CRC, just
	// computed; the records are well formed by construction).
	built bool
	// ver, if set, is a front end's verification of a transactional batch
	// (see Frontend.AppendNoWaitVerified).
	ver *Verification
}

// write is Append without the wait for durability: when wait is true the
// caller must WaitDurable(res.LastOffset+1) before acknowledging.
func (p *Partition) write(b []byte, o writeOpts) (res AppendResult, wait bool, err error) {
	untrusted := !o.built
	validate := batch.ValidateBuilt
	if untrusted {
		validate = batch.ValidateProduce
	}
	st := p.settings.Load()
	v, err := validate(b, st.maxBatch)
	if err == nil && untrusted && st.logAppendTime && v.LogAppendTime() {
		err = fmt.Errorf("producer should not set timestamp type to LogAppendTime: %w", ErrInvalidTimestamp)
	}
	if err == nil && untrusted {
		// Bytes from outside the process have their records decoded
		// before anything is written, as Kafka's LogValidator does: a bad
		// varint or a wrong record count is refused here, not met by a
		// consumer. (A Builder's batch is well formed by construction.)
		var maxTs int64
		if v.Codec() == batch.CodecNone {
			maxTs, err = (*batch.Decoder)(nil).CheckRecordsMaxTimestamp(v) // no buffer needed
		} else {
			d := recordCheckers.Get().(*batch.Decoder)
			maxTs, err = d.CheckRecordsMaxTimestamp(v)
			recordCheckers.Put(d)
		}
		if err == nil && v.RecordsCount() > 0 && (v.LogAppendTime() || maxTs != v.MaxTimestamp()) {
			// The header's max timestamp is what lookups by time,
			// time-based retention and rolls read: Kafka's validator
			// writes the records' largest into the batch as CreateTime
			// (the topic's type; idemlog has no other), CRC resealed.
			// (Without this: a record above the header's was never found
			// by ListOffsets.) In a copy: the caller's bytes may be read
			// meanwhile, appended elsewhere at the same time, say. (Without
			// this: a data race.) Only a malformed header pays for it.
			// A LogAppendTime batch's records all read as its max, which
			// stays: only the type changes, as in Kafka.
			v = batch.Batch(bytes.Clone(v))
			v.SetCreateTime(maxTs)
		}
	}
	if err == nil && st.compact && !v.IsControl() {
		err = checkKeys(v)
	}
	if err == nil && st.timestampsBounded() {
		err = checkTimestamps(v, st, p.opts.Now().UnixMilli())
	}
	if err != nil {
		return AppendResult{}, false, fmt.Errorf("cannot append to %s-%d: %w", p.topic, p.index, err)
	}
	if st.needsRecompression(v) {
		bld := recompressors.Get().(*batch.Builder)
		defer recompressors.Put(bld)
		if v, err = recompress(v, st, bld); err != nil {
			return AppendResult{}, false, fmt.Errorf("cannot append to %s-%d: %w", p.topic, p.index, err)
		}
		if len(v) > st.maxBatch {
			return AppendResult{}, false, fmt.Errorf("cannot append to %s-%d: %d bytes once compressed as %v, over max.message.bytes %d: %w",
				p.topic, p.index, len(v), st.codec, st.maxBatch, batch.ErrTooLarge)
		}
	}
	appendTime := int64(-1)
	if st.logAppendTime {
		// Stamped before the producer check: the batch the log keeps, and
		// the producer state's record of it, carry the append time that a
		// deduplicated retry answers.
		appendTime = p.opts.Now().UnixMilli()
		buf := appendTimeBufs.Get().(*[]byte)
		v = stampAppendTime(v, appendTime, buf)
		defer putAppendTimeBuf(buf)
	}
	if !v.HasProducerID() {
		var r partition.AppendResult
		r, wait, err = p.log.AppendBatch(v, nil)
		if err != nil {
			return AppendResult{}, false, fmt.Errorf("cannot append to %s-%d: %w", p.topic, p.index, err)
		}
		return AppendResult{BaseOffset: r.BaseOffset, LastOffset: r.LastOffset, LogAppendTime: appendTime}, wait, nil
	}
	res, wait, err = p.appendIdempotent(v, o.ver)
	res.LogAppendTime = appendTime
	if res.Duplicate && st.logAppendTime {
		res.LogAppendTime = res.dupTimestamp
	}
	return res, wait, err
}

func (p *Partition) appendIdempotent(v batch.Batch, ver *Verification) (AppendResult, bool, error) {
	pid := v.ProducerID()
	ent, created, err := p.producers.Acquire(pid)
	if errors.Is(err, pidtable.ErrTooManyProducers) {
		// The limit and the way out go with the error, to the client's
		// error message and the server's log: without them, a refusal
		// that lasts until producers expire reads as a broker failure.
		return AppendResult{}, false, fmt.Errorf("cannot append producer %d to %s-%d: %w: %d producers hold state "+
			"(MaxProducersPerPartition); one frees when it has written nothing for %v (ProducerIDExpiration)",
			pid, p.topic, p.index, err, p.opts.MaxProducersPerPartition, p.opts.ProducerIDExpiration)
	}
	if err != nil {
		return AppendResult{}, false, fmt.Errorf("cannot append producer %d to %s-%d: %w", pid, p.topic, p.index, err)
	}
	st := ent.State()
	dup, isDup, err := producer.Check(st, v)
	if err == nil && !isDup && ver != nil && v.IsTransactional() && st.TxnFirstOffset() < 0 &&
		!p.verify.verified(pid, ver.token) {
		// Held since Acquire, pid's entry keeps its markers out until the
		// write is done: the token and the open transaction are current.
		err = errUnverified(p, pid)
	}
	if err != nil || isDup {
		if created {
			// An entry made for a batch that was not written holds no
			// state; it must not count against the producer limit.
			p.producers.Remove(ent)
		} else {
			p.producers.Release(ent)
		}
		if err != nil {
			return AppendResult{}, false, fmt.Errorf("cannot append to %s-%d: %w", p.topic, p.index, err)
		}
		// The original may still await its sync: the retry is acknowledged
		// under the same promise.
		return AppendResult{BaseOffset: dup.BaseOffset, LastOffset: dup.LastOffset, Duplicate: true, dupTimestamp: dup.Timestamp}, p.log.MustWait(), nil
	}
	r, wait, err := p.log.AppendBatch(v, func(base int64) { p.apply(st, v, base) })
	if err != nil && created {
		p.producers.Remove(ent)
	} else {
		p.producers.Release(ent)
	}
	if err != nil {
		return AppendResult{}, false, fmt.Errorf("cannot append to %s-%d: %w", p.topic, p.index, err)
	}
	return AppendResult{BaseOffset: r.BaseOffset, LastOffset: r.LastOffset}, wait, nil
}

// snapshotImage is the log's Snapshot callback: it runs under the log's
// writer mutex, the only place producer states change, so it may read
// every state without the entries' locks (pidtable.Table.Range's rule).
func (p *Partition) snapshotImage(offset int64) []byte {
	p.snap.Reset()
	p.producers.Range(func(pid int64, s *pidtable.State) bool {
		if s.EpochPlus1 != 0 || s.Count != 0 {
			p.snap.Add(producer.EntryOf(pid, s))
		}
		return true
	})
	return p.snap.Bytes()
}

// loadProducers rebuilds the producer table: the newest valid snapshot at or
// below the log end, then every batch from there to the end replayed
// without checks (Kafka's recovery path).
func (p *Partition) loadProducers(dir string) error {
	leo := p.log.LogEndOffset()
	entries, from, err := producer.LoadNewestLogged(dir, leo, p.opts.Logger)
	if err != nil {
		return err
	}
	if rf := p.log.RecoveredFrom(); from > rf {
		// Recovery rebuilt segments below that snapshot, and their
		// aborted-transaction indexes are rebuilt by replaying their
		// markers: start from a snapshot at or below the first of them.
		if entries, from, err = producer.LoadAtMostLogged(dir, rf, p.opts.Logger); err != nil {
			return err
		}
	}
	if first := p.log.FirstRetainedOffset(); from < first {
		// The batches between the snapshot and the first segment are
		// gone (retention moved the log start past a snapshot whose
		// successor a crash kept from being written): the snapshot's
		// state would miss what they did (a commit, say, leaving its
		// transaction open for ever). Start empty at the first segment,
		// as Kafka does below its log start: producers seen only before
		// it are unknown again, as after expiration.
		entries, from = nil, first
	}
	now := p.opts.Now()
	for _, e := range entries {
		if e.TxnFirstOffset < 0 && p.expired(e.Timestamp, now) {
			continue
		}
		ent, _, err := p.producers.Acquire(e.ProducerID)
		if err != nil {
			return fmt.Errorf("cannot load producer %d: %w", e.ProducerID, err)
		}
		e.Restore(ent.State())
		p.producers.Release(ent)
		if e.TxnFirstOffset >= 0 {
			p.txns.begin(e.ProducerID, e.TxnFirstOffset)
		}
	}
	// From the snapshot, even below the log start (DeleteRecordsBefore
	// inside a segment): what lies between still changes the state.
	return p.replay(from, leo)
}

// replay applies every batch with a producer id in [from, to). A replay
// that applies anything writes a snapshot at each segment base it passes
// that has none, and one at to (spec 2.6 (3), 2.7): without them a
// segment whose roll snapshot a crash lost stayed without one, and once
// retention took the segments below it, a later crash left no snapshot
// at or above the first segment, every producer seen only below it
// forgotten.
func (p *Partition) replay(from, to int64) error {
	if from >= to {
		return nil
	}
	have := map[int64]bool{}
	if snaps, err := producer.ListSnapshots(p.log.Dir()); err == nil {
		for _, off := range snaps {
			have[off] = true
		}
	}
	var missing []int64 // in order
	for _, base := range p.log.SegmentBases() {
		if base > from && base < to && !have[base] {
			missing = append(missing, base)
		}
	}
	snapshot := func(off int64) error {
		if err := p.log.WriteSnapshot(off, p.snapshotImage(off)); err != nil {
			return fmt.Errorf("cannot write producer snapshot at %d: %w", off, err)
		}
		return nil
	}
	for off := from; off < to; {
		c, err := p.log.ReadRetained(off, 1<<20)
		if err != nil {
			return fmt.Errorf("cannot replay producer state at %d: %w", off, err)
		}
		batches := batch.NewIter(c.Data)
		for batches.Next() {
			b := batches.Batch()
			for len(missing) > 0 && b.BaseOffset() >= missing[0] {
				if err := snapshot(missing[0]); err != nil {
					c.Release()
					return err
				}
				missing = missing[1:]
			}
			if err := p.replayBatch(b); err != nil {
				c.Release()
				return err
			}
		}
		if err := batches.Err(); err != nil {
			c.Release()
			return fmt.Errorf("cannot replay producer state at %d: %w", off, err)
		}
		off = c.NextOffset
		c.Release()
	}
	for _, base := range missing {
		if err := snapshot(base); err != nil {
			return err
		}
	}
	if have[to] {
		return nil
	}
	return snapshot(to)
}

func (p *Partition) expired(lastTimestamp int64, now time.Time) bool {
	return now.UnixMilli()-lastTimestamp >= p.opts.ProducerIDExpiration.Milliseconds()
}

// ExpireProducers drops the state of producers idle for longer than
// ProducerIDExpiration (by their last batch's timestamp), except those with
// an open transaction. A producer that comes back afterwards is unknown:
// any sequence is accepted again, which is why the expiration is long.
func (p *Partition) expireProducers() int {
	now := p.opts.Now()
	n := p.producers.Sweep(func(pid int64, s *pidtable.State) bool {
		keep := s.TxnFirstOffset() >= 0 || !p.expired(s.LastTimestamp, now)
		if !keep {
			p.verify.clear(pid) // its verification goes with its state
		}
		return keep
	})
	p.verify.expire(func(taken int64) bool { return p.expired(taken, now) })
	return n
}

// Producers returns the number of producers with state in the partition.
func (p *Partition) Producers() int { return p.producers.Len() }

func (p *Partition) close() error { return p.log.Close() }

// apply records a data batch written at base in its producer's state and
// in the partition's open transactions (under the log's writer mutex).
func (p *Partition) apply(s *pidtable.State, v batch.Batch, base int64) {
	producer.Apply(s, v, base)
	if v.IsTransactional() && s.TxnFirstOffset() == base {
		p.txns.begin(v.ProducerID(), base)
	}
}

// applyMarker records a marker written at offset (under the writer mutex,
// or while opening). An aborted transaction goes into the segment's
// aborted-transaction index before it is marked complete, as Kafka does: if
// the index write fails, the transaction stays open and pins the last
// stable offset until recovery rebuilds the index, rather than letting
// read_committed readers see its data.
func (p *Partition) applyMarker(s *pidtable.State, m producer.Marker, offset, ts int64) error {
	if first := s.TxnFirstOffset(); first >= 0 && !m.Commit {
		lso := p.txns.oldestOther(m.ProducerID)
		if lso < 0 {
			lso = offset + 1
		}
		err := p.log.IndexAborted(txnindex.Entry{ProducerID: m.ProducerID, FirstOffset: first, LastOffset: offset, LastStableOffset: lso})
		if err != nil {
			return err
		}
	}
	if _, ok := producer.ApplyMarker(s, m, offset, ts); ok {
		p.txns.end(m.ProducerID)
	}
	if h := p.onMarker.Load(); h != nil {
		(*h)(m.ProducerID, m.Commit, offset)
	}
	return nil
}

// replayBatch applies one logged batch during recovery, without checks.
func (p *Partition) replayBatch(b batch.Batch) error {
	if !b.HasProducerID() {
		return nil
	}
	var m producer.Marker
	if b.IsControl() {
		if b.RecordsCount() == 0 {
			return nil
		}
		c, err := b.Control()
		if err != nil || (c.Type != batch.ControlCommit && c.Type != batch.ControlAbort) {
			return nil // not a transaction marker: no producer state
		}
		m = producer.Marker{ProducerID: b.ProducerID(), Epoch: b.ProducerEpoch(), CoordinatorEpoch: c.CoordinatorEpoch, Commit: c.Type == batch.ControlCommit}
	}
	ent, _, err := p.producers.Acquire(b.ProducerID())
	if err != nil {
		return fmt.Errorf("cannot replay producer %d: %w", b.ProducerID(), err)
	}
	if b.IsControl() {
		if err := p.applyMarker(ent.State(), m, b.BaseOffset(), b.MaxTimestamp()); err != nil {
			p.producers.Release(ent)
			return fmt.Errorf("cannot replay marker at %d: %w", b.BaseOffset(), err)
		}
	} else {
		p.apply(ent.State(), b, b.BaseOffset())
	}
	p.producers.Release(ent)
	return nil
}

// writeMarkerDurable appends a transaction marker (a COMMIT or ABORT
// control batch) for a producer, as the transaction coordinator does at the
// end of a transaction, and waits for the sync policy's promise; it checks
// the producer's epoch and the coordinator epoch (Kafka's coordinator
// origin: no sequence checks). A marker moves the producer to its epoch, so
// a bumped marker fences the producer's older instance.
func (p *Partition) writeMarkerDurable(m producer.Marker) (AppendResult, error) {
	res, wait, err := p.writeMarker(m)
	if err == nil && wait {
		err = p.gone(p.log.WaitDurable(res.LastOffset + 1))
	}
	if err != nil {
		return AppendResult{}, err
	}
	return res, nil
}

// writeMarker is writeMarkerDurable without the wait for the sync policy: when
// wait is true the caller must WaitDurable(res.LastOffset+1).
func (p *Partition) writeMarker(m producer.Marker) (res AppendResult, wait bool, err error) {
	ent, created, err := p.producers.Acquire(m.ProducerID)
	if err != nil {
		return AppendResult{}, false, fmt.Errorf("cannot write marker to %s-%d: %w", p.topic, p.index, err)
	}
	st := ent.State()
	if err := producer.CheckMarker(st, m); err != nil {
		if created {
			p.producers.Remove(ent)
		} else {
			p.producers.Release(ent)
		}
		return AppendResult{}, false, fmt.Errorf("cannot write marker to %s-%d: %w", p.topic, p.index, err)
	}
	typ := batch.ControlAbort
	if m.Commit {
		typ = batch.ControlCommit
	}
	ts := p.opts.Now().UnixMilli()
	var buf [96]byte
	v := batch.Batch(batch.AppendMarker(buf[:0], batch.Marker{Type: typ, ProducerID: m.ProducerID,
		ProducerEpoch: m.Epoch, CoordinatorEpoch: m.CoordinatorEpoch, Timestamp: ts}))
	var indexErr error
	r, wait, err := p.log.AppendBatch(v, func(base int64) {
		indexErr = p.applyMarker(st, m, base, ts)
		// The transaction ended: a verification taken before this marker
		// no longer holds (verify.go). Under pid's entry, held until the
		// Release below.
		p.verify.clear(m.ProducerID)
	})
	if err != nil && created {
		p.producers.Remove(ent)
	} else {
		p.producers.Release(ent)
	}
	if err != nil {
		return AppendResult{}, false, p.gone(fmt.Errorf("cannot write marker to %s-%d: %w", p.topic, p.index, err))
	}
	if indexErr != nil {
		// The marker is in the log; the transaction stays open (see
		// applyMarker) and the error reaches the coordinator, which retries.
		return AppendResult{}, false, fmt.Errorf("cannot index abort in %s-%d: %w", p.topic, p.index, indexErr)
	}
	return AppendResult{BaseOffset: r.BaseOffset, LastOffset: r.LastOffset, LogAppendTime: -1}, wait, nil
}

// LastStableOffset is Kafka's LSO: the first offset of the oldest open
// transaction if it is below the high watermark, else the high watermark.
// read_committed consumers read below it.
func (p *Partition) LastStableOffset() int64 {
	hw := p.log.HighWatermark()
	if fu := p.txns.firstUnstable.Load(); fu >= 0 && fu < hw {
		// Not below the log start, as in Kafka: a transaction may begin
		// below it (DeleteRecordsBefore cut into it), and a consumer that
		// seeks to the LSO must find an offset it can fetch.
		return max(fu, p.log.LogStartOffset())
	}
	return hw
}

// ReadCommitted reads as a read_committed consumer fetches: whole batches
// below the last stable offset, and the aborted transactions that overlap
// them (Kafka's FetchResponse aborted list), appended to aborted. A
// consumer drops the aborted transactions' batches and every control batch
// (txnindex.Filter), which is what Consumer does.
func (p *Partition) ReadCommitted(offset int64, maxBytes int, aborted []txnindex.Entry) (partition.Chunk, []txnindex.Entry, error) {
	lso := p.LastStableOffset()
	c, err := p.log.ReadBelow(offset, maxBytes, lso)
	if err != nil {
		return c, aborted, p.gone(err)
	}
	if len(c.Data) == 0 {
		return c, aborted, nil
	}
	return c, p.log.AbortedTxns(offset, c.NextOffset, aborted), nil
}

// openTransactions returns the producers with a transaction open in the
// partition and where each began.
func (p *Partition) openTransactions() map[int64]int64 {
	out := map[int64]int64{}
	p.log.Locked(func() {
		for pid, first := range p.txns.open {
			out[pid] = first
		}
	})
	return out
}

// producerEpoch returns the producer's epoch in the partition (-1 if
// unknown).
func (p *Partition) producerEpoch(pid int64) (int16, error) {
	ent, created, err := p.producers.Acquire(pid)
	if err != nil {
		return -1, err
	}
	st := ent.State()
	epoch := int16(-1)
	if st.EpochPlus1 != 0 {
		epoch = st.Epoch()
	}
	if created {
		p.producers.Remove(ent)
	} else {
		p.producers.Release(ent)
	}
	return epoch, nil
}

// Read is Log.Read with a deleted or closed partition's error mapped as
// ReadCommitted maps it.
func (p *Partition) Read(offset int64, maxBytes int) (partition.Chunk, error) {
	c, err := p.log.Read(offset, maxBytes)
	return c, p.gone(err)
}
