package engine

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"

	"github.com/idemlog/idemlog/batch"
)

// The consumer-offsets store: Kafka's __consumer_offsets, in process.
//
// Every commit is a batch appended to the group's partition of the internal
// topic, one record per partition committed, in Kafka's OffsetCommitKey v1 /
// OffsetCommitValue v3 layouts:
//
//	key:   version int16 = 1 | group string | topic string | partition int32
//	value: version int16 = 3 | offset int64 | leaderEpoch int32 = -1
//	       | metadata string | commitTimestamp int64
//
// (string = int16 length + bytes). Plain commits are non-idempotent batches
// (producer id -1), applied as soon as they are written. Transactional
// commits are transactional batches of the producer, with sequences that
// continue the producer's state in the partition; their offsets stay
// pending until a COMMIT (they become current) or ABORT (dropped) marker of
// that producer is written to the partition. A record with a null value
// (a tombstone, written by DeleteGroupOffsets as a plain batch) deletes the
// group's committed offset of its partition. The state is rebuilt from the
// log the first time an engine uses the store.

const (
	// ConsumerOffsetsTopic is the internal topic of committed offsets.
	ConsumerOffsetsTopic = "__consumer_offsets"
	// ConsumerOffsetsPartitions is its partition count (Kafka's default,
	// offsets.topic.num.partitions, is 50).
	ConsumerOffsetsPartitions = 8

	offsetKeyVersion   int16 = 1
	offsetValueVersion int16 = 3
)

// TopicPartition names a partition: one whose offset a group commits, or
// one in a transaction.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// OffsetAndMetadata is a committed offset; Offset is -1 when none is.
type OffsetAndMetadata struct {
	Offset   int64
	Metadata string
}

// javaStringHashCode is Java's String.hashCode of the string Kafka makes
// of the group id's bytes (new String(bytes, UTF_8)): s[0]*31^(n-1) + ...
// + s[n-1] over the UTF-16 code units, in int32 arithmetic. Ill-formed
// UTF-8 is decoded as the JDK does (javaUTF16Units), not as Go's range
// does (one U+FFFD per bad byte): a group id a Go client sends with a
// truncated sequence must hash as Kafka hashes it.
func javaStringHashCode(s string) int32 {
	var h int32
	javaUTF16Units(s, func(u uint16) { h = 31*h + int32(u) })
	return h
}

// groupPartition: see Frontend.GroupPartition.
func groupPartition(group string) int {
	h := javaStringHashCode(group)
	if h == math.MinInt32 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return int(h) % ConsumerOffsetsPartitions
}

// offsetValue is a committed (or pending) offset and the log offset of its
// record, which orders commits: a transaction's offsets never replace an
// offset committed later in the log (Kafka's olderThan rule).
type offsetValue struct {
	OffsetAndMetadata
	commitTimestamp int64
	logOffset       int64
	// installedAt is where the offset became current in the log: its
	// record for a plain commit, the COMMIT marker for a transactional
	// one. A tombstone deletes only offsets installed before it.
	installedAt int64
}

type markerSeen struct {
	offset int64
	commit bool
}

// offsetsPartition is the state of one __consumer_offsets partition.
type offsetsPartition struct {
	p *Partition
	// appendMu serializes transactional appends, from choosing the
	// sequence to the write (only the store writes data here), and
	// deletions.
	appendMu sync.Mutex
	// commitMu is held shared by a plain commit from its write to its
	// registration, and exclusively by a deletion: so no commit written
	// before a deletion's tombstones is registered after them.
	commitMu sync.RWMutex

	// mu guards everything below. It is taken by the marker hook under the
	// log's writer mutex, so it is never held while appending.
	mu        sync.Mutex
	committed map[string]map[TopicPartition]offsetValue
	// pending: producer id -> group -> partition -> offset.
	pending map[int64]map[string]map[TopicPartition]offsetValue
	// replayedTo: markers below it were seen by the replay.
	replayedTo int64
	// ready is set once the replay is done; until then the hook keeps
	// markers in early (openOffsets).
	ready bool
	early []earlyMarker
	// While transactional appends are in flight (inflight > 0), markers
	// are remembered: one may end the transaction of a batch written
	// before it but registered after it ran.
	inflight int
	markers  map[int64][]markerSeen
	// While a deletion's tombstones are between their write and their
	// application (deleting), what markers make current is kept in
	// installed: in log order those markers come after the tombstones,
	// so what they installed must survive the deletion. (Without this: a
	// COMMIT in that window was lost live and came back at a restart.)
	deleting  bool
	installed []installedOffset
}

// installedOffset is an offset a marker made current during a deletion.
type installedOffset struct {
	group string
	tp    TopicPartition
	v     offsetValue
}

// earlyMarker is a marker the hook saw before the store was ready.
type earlyMarker struct {
	pid    int64
	commit bool
	offset int64
}

type offsetStore struct {
	e     *Engine
	parts [ConsumerOffsetsPartitions]*offsetsPartition
}

// offsets returns e's store, creating the internal topic and replaying it
// on first use.
func (e *Engine) offsets() (*offsetStore, error) {
	e.offsetsMu.Lock()
	defer e.offsetsMu.Unlock()
	// The flag alone, not mu: a topic operation holding mu for long (a
	// config change of a wide topic, a creation of thousands of
	// partitions) must not stall every group and offset request. A Close
	// that sets it just after is met by CreateTopic's own check under mu.
	if e.closed.Load() {
		return nil, ErrClosed
	}
	if e.offsetStore != nil {
		return e.offsetStore, nil
	}
	s, err := openOffsets(e)
	if err != nil {
		return nil, err
	}
	e.offsetStore = s
	return s, nil
}

// openOffsets creates the internal topic's missing partitions, installs the
// marker hooks and rebuilds the state from the log.
func openOffsets(e *Engine) (*offsetStore, error) {
	if err := e.createTopic(ConsumerOffsetsTopic, ConsumerOffsetsPartitions, nil, createAny); err != nil {
		return nil, fmt.Errorf("cannot create %s: %w", ConsumerOffsetsTopic, err)
	}
	s := &offsetStore{e: e}
	for i := range s.parts {
		p, err := e.Partition(ConsumerOffsetsTopic, i)
		if err != nil {
			return nil, err
		}
		op := &offsetsPartition{p: p,
			committed: map[string]map[TopicPartition]offsetValue{},
			pending:   map[int64]map[string]map[TopicPartition]offsetValue{},
		}
		// The hook goes in under the log's writer mutex, with the log end
		// read there: every marker below that end is in the log for the
		// replay, every later one reaches the hook. The replay reads below
		// the high watermark, which under DurableVisibility may lag that
		// end (a marker the coordinator's recovery wrote and has not yet
		// synced), so it waits for the sync first, holding no lock (the
		// hook runs under the writer mutex, which the sync needs), while
		// the hook keeps what arrives for after the replay (op.early).
		// (Without this: a marker appended before the hook and not yet
		// synced was seen by neither, and its commit never took effect.)
		var end int64
		hook := markerHook(op.onMarker)
		p.log.Locked(func() {
			p.onMarker.Store(&hook)
			end = p.log.WrittenEnd()
		})
		if p.log.HighWatermark() < end {
			err = p.log.WaitDurable(end)
		}
		op.mu.Lock()
		if err == nil {
			err = op.replay()
		}
		if err == nil {
			// Markers that reached the hook during the wait and the replay,
			// in log order; the replay applied those below replayedTo.
			for _, m := range op.early {
				if m.offset >= op.replayedTo {
					op.applyMarker(m.pid, m.commit, m.offset)
				}
			}
			op.early, op.ready = nil, true
		}
		op.mu.Unlock()
		if err != nil {
			// The hooks installed so far would keep markers for a store
			// that never becomes ready: removed, for the next open to
			// install its own.
			for j := 0; j <= i; j++ {
				if q, perr := e.Partition(ConsumerOffsetsTopic, j); perr == nil {
					q.onMarker.Store(nil)
				}
			}
			return nil, fmt.Errorf("cannot replay %s-%d: %w", ConsumerOffsetsTopic, i, err)
		}
		s.parts[i] = op
	}
	return s, nil
}

// replay applies every batch of the partition's log (under mu).
func (op *offsetsPartition) replay() error {
	var dec batch.Decoder
	off := op.p.log.LogStartOffset()
	for {
		c, err := op.p.log.Read(off, 1<<20)
		if err != nil {
			return fmt.Errorf("cannot replay %s-%d at %d: %w", ConsumerOffsetsTopic, op.p.index, off, err)
		}
		if len(c.Data) == 0 {
			c.Release()
			break
		}
		batches := batch.NewIter(c.Data)
		for batches.Next() {
			if err := op.replayBatch(&dec, batches.Batch()); err != nil {
				c.Release()
				return err
			}
		}
		if err := batches.Err(); err != nil {
			c.Release()
			return fmt.Errorf("cannot replay %s-%d at %d: %w", ConsumerOffsetsTopic, op.p.index, off, err)
		}
		off = c.NextOffset
		c.Release()
	}
	op.replayedTo = off
	return nil
}

func (op *offsetsPartition) replayBatch(dec *batch.Decoder, b batch.Batch) error {
	if b.IsControl() {
		if b.RecordsCount() == 0 || !b.HasProducerID() {
			return nil
		}
		c, err := b.Control()
		if err != nil || (c.Type != batch.ControlCommit && c.Type != batch.ControlAbort) {
			return nil
		}
		op.applyMarker(b.ProducerID(), c.Type == batch.ControlCommit, b.BaseOffset())
		return nil
	}
	if b.ComputeCRC() != b.CRC() {
		// A clean open trusts the segments without a scan, so a batch
		// damaged on disk reaches here. Its records cannot be told from
		// garbage: a key read wrongly would drop a group's offset (a
		// consumer then starts from its reset policy) or install another
		// group's. The intact records stand; each group whose commit was in
		// this batch falls back to its previous one, and consumers
		// re-process from there rather than skip.
		op.p.opts.Logger.Warn("consumer-offset commit fails its checksum: skipped, its groups keep their previous commits",
			"dir", op.p.log.Dir(), "offset", b.BaseOffset(), "records", b.RecordsCount(),
			"crc", fmt.Sprintf("%08x", b.CRC()), "computed_crc", fmt.Sprintf("%08x", b.ComputeCRC()))
		return nil
	}
	recs, err := dec.Records(b)
	if err != nil {
		return fmt.Errorf("cannot replay %s-%d at %d: %w", ConsumerOffsetsTopic, op.p.index, b.BaseOffset(), err)
	}
	txn := b.IsTransactional() && b.HasProducerID()
	var r batch.Record
	for recs.Next(&r) {
		group, tp, ok := decodeOffsetKey(r.Key)
		if !ok {
			continue // group metadata, or a layout this store does not read
		}
		if r.Value == nil { // tombstone
			if txn {
				continue
			}
			if g := op.committed[group]; g != nil {
				if delete(g, tp); len(g) == 0 {
					delete(op.committed, group)
				}
			}
			continue
		}
		v, ok := decodeOffsetValue(r.Value)
		if !ok {
			continue
		}
		v.logOffset, v.installedAt = r.Offset, r.Offset
		if txn {
			op.addPending(b.ProducerID(), group, tp, v)
		} else {
			op.commit(group, tp, v)
		}
	}
	if err := recs.Err(); err != nil {
		return fmt.Errorf("cannot replay %s-%d at %d: %w", ConsumerOffsetsTopic, op.p.index, b.BaseOffset(), err)
	}
	return nil
}

// onMarker is the partition's marker hook (under its writer mutex).
func (op *offsetsPartition) onMarker(pid int64, commit bool, offset int64) {
	op.mu.Lock()
	defer op.mu.Unlock()
	if !op.ready {
		// The store is still being built (openOffsets): kept for after
		// the replay.
		op.early = append(op.early, earlyMarker{pid: pid, commit: commit, offset: offset})
		return
	}
	if offset < op.replayedTo {
		return // the replay applied it
	}
	if op.inflight > 0 {
		op.markers[pid] = append(op.markers[pid], markerSeen{offset: offset, commit: commit})
	}
	op.applyMarker(pid, commit, offset)
}

// applyMarker ends pid's transaction with the marker at offset (under mu).
func (op *offsetsPartition) applyMarker(pid int64, commit bool, offset int64) {
	groups := op.pending[pid]
	delete(op.pending, pid)
	if !commit {
		return
	}
	for group, tps := range groups {
		for tp, v := range tps {
			v.installedAt = offset
			op.commit(group, tp, v)
			if op.deleting {
				op.installed = append(op.installed, installedOffset{group, tp, v})
			}
		}
	}
}

// commit makes v current unless a later record already is (under mu).
func (op *offsetsPartition) commit(group string, tp TopicPartition, v offsetValue) {
	g := op.committed[group]
	if g == nil {
		g = map[TopicPartition]offsetValue{}
		op.committed[group] = g
	}
	if old, ok := g[tp]; ok && old.logOffset > v.logOffset {
		return
	}
	g[tp] = v
}

func (op *offsetsPartition) addPending(pid int64, group string, tp TopicPartition, v offsetValue) {
	groups := op.pending[pid]
	if groups == nil {
		groups = map[string]map[TopicPartition]offsetValue{}
		op.pending[pid] = groups
	}
	g := groups[group]
	if g == nil {
		g = map[TopicPartition]offsetValue{}
		groups[group] = g
	}
	if old, ok := g[tp]; ok && old.logOffset > v.logOffset {
		return
	}
	g[tp] = v
}

// commitOffsets is CommitOffsets; with existing, every partition must be
// one of the engine's (Consumer.Commit).
func (e *Engine) commitOffsets(group string, offsets map[TopicPartition]OffsetAndMetadata, existing bool) error {
	op, err := e.offsetsPartitionOf(group, offsets)
	if err != nil || len(offsets) == 0 {
		return err
	}
	ts := e.opts.Now().UnixMilli()
	b, err := buildOffsetsBatch(group, offsets, -1, 0, -1, ts)
	if err != nil {
		return err
	}
	op.commitMu.RLock()
	defer op.commitMu.RUnlock()
	// A consumer's positions must be in existing partitions: a deleted
	// topic's offsets would come back, and a topic created anew under the
	// name resume from them, skipping its first records.
	// Checked under commitMu: DeleteTopic takes the partitions off the map
	// before its offsets deletion waits for commitMu, so a commit either
	// sees them gone or is written before that deletion runs.
	if existing {
		parts := *e.parts.Load()
		for tp := range offsets {
			if tp.Partition < 0 || parts[partitionKey(tp.Topic, int(tp.Partition))] == nil {
				return fmt.Errorf("cannot commit offsets of group %q for %s partition %d: %w", group, tp.Topic, tp.Partition, ErrUnknownTopicOrPartition)
			}
		}
	}
	res, err := op.p.appendWait(b, writeOpts{})
	if err != nil {
		return fmt.Errorf("cannot commit offsets of group %q: %w", group, err)
	}
	op.mu.Lock()
	for tp, v := range placedOffsets(offsets, res.BaseOffset, ts) {
		op.commit(group, tp, v)
	}
	op.mu.Unlock()
	return nil
}

// TxnCommitOffsets is Engine.TxnCommitOffsets verified against the
// coordinator (KIP-890 part 1, engine/verify.go): transactional id id maps
// to pid at epoch, and its transaction is ongoing with the group's
// __consumer_offsets partition in it (AddOffsetsToTxn), until the commit is
// written; otherwise ErrInvalidTxnState (or the lookup's
// ErrInvalidProducerIDMapping, ErrProducerFenced) and nothing is written.
// A late TxnOffsetCommit of an ended transaction would otherwise open a
// transaction in that partition that no coordinator ends.
func (c *Coordinator) TxnCommitOffsets(id, group string, pid int64, epoch int16, offsets map[TopicPartition]OffsetAndMetadata) error {
	e := c.e
	if pid < 0 {
		return fmt.Errorf("cannot commit offsets of group %q: producer id %d: %w", group, pid, ErrInvalidOffsetCommit)
	}
	ref, err := e.offsetsTopicPartition(group)
	if err != nil {
		return err
	}
	p, err := e.Partition(ref.Topic, int(ref.Partition))
	if err != nil {
		return err
	}
	var ver Verification
	if !p.txnOpen(pid, epoch) {
		ver = p.beginVerification(pid)
		if err := c.Verify(id, pid, epoch, ref); err != nil {
			return fmt.Errorf("cannot commit offsets of group %q: %w", group, err)
		}
	}
	return e.txnCommitOffsets(group, pid, epoch, offsets, &ver)
}

func (e *Engine) txnCommitOffsets(group string, pid int64, epoch int16, offsets map[TopicPartition]OffsetAndMetadata, ver *Verification) error {
	if pid < 0 {
		return fmt.Errorf("cannot commit offsets of group %q: producer id %d: %w", group, pid, ErrInvalidOffsetCommit)
	}
	op, err := e.offsetsPartitionOf(group, offsets)
	if err != nil || len(offsets) == 0 {
		return err
	}
	op.appendMu.Lock()
	defer op.appendMu.Unlock()
	seq, err := op.nextSequence(pid, epoch)
	if err != nil {
		return fmt.Errorf("cannot commit offsets of group %q: %w", group, err)
	}
	ts := e.opts.Now().UnixMilli()
	b, err := buildOffsetsBatch(group, offsets, pid, epoch, seq, ts)
	if err != nil {
		return err
	}
	op.mu.Lock()
	if op.inflight++; op.markers == nil {
		op.markers = map[int64][]markerSeen{}
	}
	op.mu.Unlock()
	res, err := op.p.appendWait(b, writeOpts{ver: ver})
	if h := op.p.opts.private.offsetsAppendedHook; err == nil && h != nil {
		h(op.p, pid, epoch)
	}
	op.mu.Lock()
	defer op.mu.Unlock()
	if err == nil {
		// A marker may have run between the write and here: the first of
		// pid's markers after the batch ends its transaction.
		var end *markerSeen
		for i, m := range op.markers[pid] {
			if m.offset > res.BaseOffset {
				end = &op.markers[pid][i]
				break
			}
		}
		for tp, v := range placedOffsets(offsets, res.BaseOffset, ts) {
			switch {
			case end == nil:
				op.addPending(pid, group, tp, v)
			case end.commit:
				v.installedAt = end.offset
				op.commit(group, tp, v)
			}
		}
	}
	if op.inflight--; op.inflight == 0 {
		op.markers = nil
	}
	if err != nil {
		return fmt.Errorf("cannot commit offsets of group %q: %w", group, err)
	}
	return nil
}

// nextSequence is the sequence pid's next batch at epoch must carry in the
// partition: 0 for a producer the partition does not know or at another
// epoch, else one past its newest batch's (under appendMu).
func (op *offsetsPartition) nextSequence(pid int64, epoch int16) (int32, error) {
	ent, created, err := op.p.producers.Acquire(pid)
	if err != nil {
		return 0, err
	}
	s := ent.State()
	var seq int32
	if (s.EpochPlus1 != 0 || s.Count != 0) && s.Epoch() == epoch {
		if n := s.Newest(); n != nil && n.LastSeq != math.MaxInt32 {
			seq = n.LastSeq + 1
		}
	}
	if created {
		op.p.producers.Remove(ent)
	} else {
		op.p.producers.Release(ent)
	}
	return seq, nil
}

// placedOffsets gives each offset of a batch written at base, in
// buildOffsetsBatch's order, the log offset of its record.
func placedOffsets(offsets map[TopicPartition]OffsetAndMetadata, base, ts int64) map[TopicPartition]offsetValue {
	out := make(map[TopicPartition]offsetValue, len(offsets))
	for i, tp := range sortedTPs(offsets) {
		off := base + int64(i)
		out[tp] = offsetValue{OffsetAndMetadata: offsets[tp], commitTimestamp: ts, logOffset: off, installedAt: off}
	}
	return out
}

func sortedTPs(offsets map[TopicPartition]OffsetAndMetadata) []TopicPartition {
	tps := slices.Collect(maps.Keys(offsets))
	sortTPs(tps)
	return tps
}

func sortTPs(tps []TopicPartition) {
	slices.SortFunc(tps, func(a, b TopicPartition) int {
		if c := cmp.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return cmp.Compare(a.Partition, b.Partition)
	})
}

// offsetsPartitionOf validates a commit and returns the group's partition.
func (e *Engine) offsetsPartitionOf(group string, offsets map[TopicPartition]OffsetAndMetadata) (*offsetsPartition, error) {
	if group == "" {
		return nil, fmt.Errorf("cannot commit offsets: %w", ErrInvalidGroupID)
	}
	if len(group) > math.MaxInt16 {
		return nil, fmt.Errorf("cannot commit offsets: group id of %d bytes: %w", len(group), ErrInvalidOffsetCommit)
	}
	for tp, om := range offsets {
		if len(tp.Topic) > math.MaxInt16 || len(om.Metadata) > math.MaxInt16 {
			return nil, fmt.Errorf("cannot commit offsets of group %q: string over %d bytes: %w", group, math.MaxInt16, ErrInvalidOffsetCommit)
		}
	}
	s, err := e.offsets()
	if err != nil {
		return nil, err
	}
	return s.parts[groupPartition(group)], nil
}

// buildOffsetsBatch builds a commit's batch, one record per partition in
// sortedTPs order; pid -1 builds a plain batch.
func buildOffsetsBatch(group string, offsets map[TopicPartition]OffsetAndMetadata, pid int64, epoch int16, seq int32, ts int64) (batch.Batch, error) {
	bld := batch.NewBuilder(batch.CodecNone)
	if pid >= 0 {
		bld.SetProducer(pid, epoch, seq)
		bld.SetTransactional(true)
	}
	var key, val []byte
	for _, tp := range sortedTPs(offsets) {
		key = encodeOffsetKey(key[:0], group, tp)
		val = encodeOffsetValue(val[:0], offsets[tp], ts)
		bld.Append(ts, key, val, nil)
	}
	b, err := bld.Build()
	if err != nil {
		return nil, fmt.Errorf("cannot commit offsets of group %q: %w", group, err)
	}
	return b, nil
}

// deleteGroupOffsets: see Frontend.DeleteGroupOffsets.
func (e *Engine) deleteGroupOffsets(group string) (had bool, err error) {
	op, err := e.offsetsPartitionOf(group, nil)
	if err != nil {
		return false, err
	}
	return op.tombstone(e, group, nil, false)
}

// tombstone deletes group's committed offsets of the partitions match
// accepts (nil: all), as DeleteGroupOffsets describes; had reports whether
// there were any. With durable the tombstones are synced whatever the
// partition's sync policy before they take effect (a topic's deletion
// renames its directories only after them).
func (op *offsetsPartition) tombstone(e *Engine, group string, match func(TopicPartition) bool, durable bool) (had bool, err error) {
	// No commit of the partition is between its write and its
	// registration while the tombstones are written and applied: commits
	// written before them are in the map, later ones come after. Markers
	// still run (under the log's writer mutex), hence installedAt.
	op.appendMu.Lock()
	defer op.appendMu.Unlock()
	op.commitMu.Lock()
	defer op.commitMu.Unlock()
	op.mu.Lock()
	var tps []TopicPartition
	for tp := range op.committed[group] {
		if match == nil || match(tp) {
			tps = append(tps, tp)
		}
	}
	// Deletions of a partition run one at a time (appendMu): one flag.
	op.deleting = len(tps) > 0
	op.mu.Unlock()
	if len(tps) == 0 {
		return false, nil
	}
	defer func() {
		op.mu.Lock()
		op.deleting, op.installed = false, nil
		op.mu.Unlock()
	}()
	sortTPs(tps)
	ts := e.opts.Now().UnixMilli()
	bld := batch.NewBuilder(batch.CodecNone)
	var key []byte
	for _, tp := range tps {
		key = encodeOffsetKey(key[:0], group, tp)
		bld.Append(ts, key, nil, nil)
	}
	b, err := bld.Build()
	if err != nil {
		return true, fmt.Errorf("cannot delete offsets of group %q: %w", group, err)
	}
	res, err := op.p.appendWait(b, writeOpts{})
	if err == nil && durable {
		err = op.p.gone(op.p.log.WaitDurable(res.LastOffset + 1))
	}
	if err != nil {
		return true, fmt.Errorf("cannot delete offsets of group %q: %w", group, err)
	}
	if h := op.p.opts.private.offsetsTombstonedHook; h != nil {
		h(op.p)
	}
	op.mu.Lock()
	defer op.mu.Unlock()
	g := op.committed[group]
	at := make(map[TopicPartition]int64, len(tps)) // each tombstone's offset
	for i, tp := range tps {
		at[tp] = res.BaseOffset + int64(i)
		if v, ok := g[tp]; ok && v.installedAt < at[tp] {
			delete(g, tp)
		}
	}
	if len(g) == 0 {
		delete(op.committed, group)
	}
	// A marker after a tombstone in the log installs its offsets after the
	// deletion, as the replay will.
	for _, in := range op.installed {
		if t, ok := at[in.tp]; ok && in.group == group && in.v.installedAt > t {
			op.commit(in.group, in.tp, in.v)
		}
	}
	return true, nil
}

// deleteTopic deletes every group's committed offsets of topic, as Kafka's
// group coordinator does when a topic is deleted: a topic created again
// under the name starts without them. The tombstones are durable when it
// returns, under every sync policy (DeleteTopic). Pending transactional
// offsets are left alone (see DeleteGroupOffsets).
func (s *offsetStore) deleteTopic(topic string) error {
	var errs []error
	for _, op := range s.parts {
		// Commits in flight finish first (the topic is already off the
		// engine's map, so none that starts now passes its check), and
		// none registers while the groups are read. (CommitOffsets.)
		op.commitMu.Lock()
		op.mu.Lock()
		var groups []string
		for g, offs := range op.committed {
			for tp := range offs {
				if tp.Topic == topic {
					groups = append(groups, g)
					break
				}
			}
		}
		op.mu.Unlock()
		op.commitMu.Unlock()
		slices.Sort(groups)
		for _, g := range groups {
			if _, err := op.tombstone(s.e, g, func(tp TopicPartition) bool { return tp.Topic == topic }, true); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// groupHasOffsets: see Frontend.GroupHasOffsets.
func (e *Engine) groupHasOffsets(group string) bool {
	if group == "" {
		return false
	}
	s, err := e.offsets()
	if err != nil {
		return false
	}
	op := s.parts[groupPartition(group)]
	op.mu.Lock()
	defer op.mu.Unlock()
	if len(op.committed[group]) > 0 {
		return true
	}
	for _, groups := range op.pending {
		if len(groups[group]) > 0 {
			return true
		}
	}
	return false
}

// offsetGroups: see Frontend.OffsetGroups.
func (e *Engine) offsetGroups() ([]string, error) {
	s, err := e.offsets()
	if err != nil {
		return nil, err
	}
	seen := make(map[string]struct{})
	for _, op := range s.parts {
		op.mu.Lock()
		for group, offs := range op.committed {
			if len(offs) > 0 {
				seen[group] = struct{}{}
			}
		}
		for _, groups := range op.pending {
			for group, offs := range groups {
				if len(offs) > 0 {
					seen[group] = struct{}{}
				}
			}
		}
		op.mu.Unlock()
	}
	return slices.Sorted(maps.Keys(seen)), nil
}

// fetchOffsets: see Frontend.FetchOffsets.
func (e *Engine) fetchOffsets(group string, tps []TopicPartition, requireStable bool) (map[TopicPartition]OffsetAndMetadata, error) {
	s, err := e.offsets()
	if err != nil {
		return nil, err
	}
	op := s.parts[groupPartition(group)]
	op.mu.Lock()
	defer op.mu.Unlock()
	if requireStable {
		for pid, groups := range op.pending {
			g := groups[group]
			if len(g) == 0 {
				continue
			}
			if tps == nil {
				return nil, fmt.Errorf("cannot fetch offsets of group %q: producer %d has a pending commit: %w", group, pid, ErrUnstableOffsetCommit)
			}
			for _, tp := range tps {
				if _, ok := g[tp]; ok {
					return nil, fmt.Errorf("cannot fetch offsets of group %q: producer %d has a pending commit for %s-%d: %w", group, pid, tp.Topic, tp.Partition, ErrUnstableOffsetCommit)
				}
			}
		}
	}
	committed := op.committed[group]
	out := make(map[TopicPartition]OffsetAndMetadata, max(len(tps), len(committed)))
	if tps == nil {
		for tp, v := range committed {
			out[tp] = v.OffsetAndMetadata
		}
		return out, nil
	}
	for _, tp := range tps {
		if v, ok := committed[tp]; ok {
			out[tp] = v.OffsetAndMetadata
		} else {
			out[tp] = OffsetAndMetadata{Offset: -1}
		}
	}
	return out, nil
}

// Record layouts.

func appendOffsetString(dst []byte, s string) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(s)))
	return append(dst, s...)
}

func encodeOffsetKey(dst []byte, group string, tp TopicPartition) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(offsetKeyVersion))
	dst = appendOffsetString(dst, group)
	dst = appendOffsetString(dst, tp.Topic)
	return binary.BigEndian.AppendUint32(dst, uint32(tp.Partition))
}

func encodeOffsetValue(dst []byte, om OffsetAndMetadata, ts int64) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(offsetValueVersion))
	dst = binary.BigEndian.AppendUint64(dst, uint64(om.Offset))
	dst = binary.BigEndian.AppendUint32(dst, math.MaxUint32) // leaderEpoch -1
	dst = appendOffsetString(dst, om.Metadata)
	return binary.BigEndian.AppendUint64(dst, uint64(ts))
}

var errShortOffsetRecord = errors.New("short offset record")

type offsetReader struct {
	b   []byte
	err error
}

func (r *offsetReader) next(n int) []byte {
	if r.err != nil || len(r.b) < n {
		r.err = errShortOffsetRecord
		return make([]byte, n)
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *offsetReader) int16() int16 { return int16(binary.BigEndian.Uint16(r.next(2))) }
func (r *offsetReader) int32() int32 { return int32(binary.BigEndian.Uint32(r.next(4))) }
func (r *offsetReader) int64() int64 { return int64(binary.BigEndian.Uint64(r.next(8))) }

// string reads an int16-length string; a null (-1) one is "".
func (r *offsetReader) string() string {
	n := r.int16()
	if n < 0 {
		return ""
	}
	return string(r.next(int(n)))
}

// decodeOffsetKey reads an OffsetCommitKey (versions 0 and 1); ok is false
// for other keys (version 2 is group metadata).
func decodeOffsetKey(b []byte) (group string, tp TopicPartition, ok bool) {
	r := offsetReader{b: b}
	if v := r.int16(); v != 0 && v != 1 {
		return "", tp, false
	}
	group = r.string()
	tp.Topic = r.string()
	tp.Partition = r.int32()
	return group, tp, r.err == nil
}

// decodeOffsetValue reads an OffsetCommitValue, versions 0 to 3 (version 4,
// flexible, is not read).
func decodeOffsetValue(b []byte) (offsetValue, bool) {
	r := offsetReader{b: b}
	ver := r.int16()
	if ver < 0 || ver > 3 {
		return offsetValue{}, false
	}
	var v offsetValue
	v.Offset = r.int64()
	if ver >= 3 {
		r.int32() // leaderEpoch
	}
	v.Metadata = r.string()
	v.commitTimestamp = r.int64()
	if ver == 1 {
		r.int64() // expireTimestamp
	}
	return v, r.err == nil
}
