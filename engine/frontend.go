package engine

import (
	"errors"
	"fmt"
	"sync"

	"github.com/idemlog/idemlog/partition"
	"github.com/idemlog/idemlog/txnindex"
)

// Frontend is the part of the engine that only a Kafka front end needs
// (package kafka, which serves Kafka clients, and tools that look inside
// the engine: mirror, bench): the transaction coordinator's requests and
// the verification of transactional appends (KIP-890), appends that leave
// the durability wait to the caller, the consumer-offsets store addressed
// by group, topic ids and Kafka's admin calls on topics and configs, the
// periodic maintenance a caller with its own clock drives, and a read-only
// view of a partition's log. An embedding program needs none of it: it
// writes through Partition.Append, Producer and TransactionalProducer, and
// reads through Partition.Read, ReadCommitted and Consumer.
//
// Nothing here appends past the producer rules: every append checks a
// batch as a client's produce, and a transactional one that would open a
// transaction the coordinator did not verify is refused.
type Frontend struct{ e *Engine }

// Frontend returns the engine's front-end handle.
func (e *Engine) Frontend() Frontend { return Frontend{e} }

// appendNoWait: see Frontend.AppendNoWait.
func (p *Partition) appendNoWait(b []byte) (res AppendResult, wait bool, err error) {
	res, wait, err = p.write(b, writeOpts{})
	return res, wait, p.gone(err)
}

// offsetsTopicPartition: see Frontend.OffsetsPartition.
func (e *Engine) offsetsTopicPartition(group string) (TopicPartition, error) {
	if group == "" {
		return TopicPartition{}, ErrInvalidGroupID
	}
	if _, err := e.offsets(); err != nil {
		return TopicPartition{}, err
	}
	return TopicPartition{Topic: ConsumerOffsetsTopic, Partition: int32(groupPartition(group))}, nil
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
func (c *Coordinator) Verify(id string, pid int64, epoch int16, tp TopicPartition) error {
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

// txnOpen: see Frontend.TxnOpen.
func (p *Partition) txnOpen(pid int64, epoch int16) bool {
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

// waitAll: see Frontend.WaitAll.
func waitAll(ws []DurableWait) {
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

// applyRetention: see Frontend.ApplyRetention.
func (e *Engine) applyRetention() (int, error) {
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

// Coordinator returns the engine's transaction coordinator, opening (and
// recovering) it on first use.
func (f Frontend) Coordinator() (*Coordinator, error) { return f.e.coordinator() }

// CreateTopic creates a topic that must not exist yet, as Kafka's
// CreateTopics creates: ErrTopicAlreadyExists if it does, ErrInvalidTopic if
// its name collides with an existing topic's once '.' and '_' are taken
// alike (Kafka's rule: their metric names would clash). The check and the
// creation are one step, so of concurrent creations of a topic exactly one
// succeeds. Otherwise as Engine.CreateTopic, except that the internal
// topics are not refused here: a Kafka front end answers for them as Kafka
// does.
func (f Frontend) CreateTopic(topic string, partitions int, cfg map[string]string) error {
	return f.e.createTopic(topic, partitions, cfg, createNew)
}

// AddPartitions raises topic's partition count to count, as Kafka's
// CreatePartitions: the new partitions take the topic's configs (those its
// partition 0 was created with) and its id. ErrUnknownTopicOrPartition for
// an unknown topic, ErrInvalidPartitions unless count is above the current
// count, ErrInvalidTopic for an internal topic (the engine maps groups and
// transactional ids onto their fixed partition counts). The checks and the
// creation are one step under the engine's lock, so that a DeleteTopic in
// between cannot have it create the deleted topic anew, and of two
// concurrent calls for the same count one fails.
func (f Frontend) AddPartitions(topic string, count int) error {
	return f.e.createTopic(topic, count, nil, addOnly)
}

// AppendNoWait is Partition.Append without the wait for the sync policy's
// promise: when wait is true the caller must call
// p.WaitDurable(res.LastOffset+1) (or WaitAll) before acknowledging the
// batch. A front end appends a request's batches to all their partitions
// first and then waits once per partition, so the partitions' syncs
// overlap instead of running one after another. The internal topics are
// not refused here: the front end refuses produce requests to them itself,
// with the error Kafka answers.
func (f Frontend) AppendNoWait(p *Partition, b []byte) (res AppendResult, wait bool, err error) {
	return p.appendNoWait(b)
}

// BeginVerification starts a verification of producer pid's next
// transactional append to p: call it before asking the coordinator
// (Coordinator.Verify), and append with AppendNoWaitVerified. Concurrent
// verifications of one producer share its token until a marker clears it,
// as Kafka's requests share one verification guard: a second request must
// not void the first one's check.
func (f Frontend) BeginVerification(p *Partition, pid int64) Verification {
	return p.beginVerification(pid)
}

// AppendNoWaitVerified is AppendNoWait for a front end's transactional
// batch: one that would open a transaction in the partition is refused
// with ErrInvalidTxnState unless ver is the producer's token and no marker
// of the producer came since it was taken. Other batches append as with
// AppendNoWait.
func (f Frontend) AppendNoWaitVerified(p *Partition, b []byte, ver Verification) (res AppendResult, wait bool, err error) {
	return p.appendNoWaitVerified(b, ver)
}

// TxnOpen reports whether pid has a transaction open in p, that is,
// whether a transactional append of pid continues a transaction the
// coordinator already verified. It never waits: an entry another append
// holds right now reads as "not open", which only costs the caller a
// Coordinator.Verify. Only a transaction at epoch counts, as Kafka's
// hasOngoingTransaction(producerId, producerEpoch): a batch at another
// epoch is verified, so one at a made-up higher epoch cannot move the
// partition's producer past the coordinator's, whose marker would then be
// refused and the transaction stuck in PrepareCommit.
func (f Frontend) TxnOpen(p *Partition, pid int64, epoch int16) bool { return p.txnOpen(pid, epoch) }

// WaitAll waits for every ws[i] at once, so the partitions' syncs run side
// by side instead of one after another (a request or a transaction that
// touched several partitions under SyncAlways pays one sync's latency, not
// one per partition). Each partition's group-commit leader is the goroutine
// that waits on it, hence one goroutine per partition beyond the first.
func (f Frontend) WaitAll(ws []DurableWait) { waitAll(ws) }

// InitProducerID returns a new producer id at epoch 0, for an idempotent
// producer without a transactional id (Kafka's InitProducerId without
// one). Ids are unique across restarts.
func (f Frontend) InitProducerID() (pid int64, epoch int16, err error) { return f.e.initProducerID() }

// OffsetsPartition returns the partition of the consumer-offsets topic that
// holds group's commits (creating the internal topic on first use): what
// AddOffsetsToTxn adds to a transaction.
func (f Frontend) OffsetsPartition(group string) (TopicPartition, error) {
	return f.e.offsetsTopicPartition(group)
}

// GroupPartition is the __consumer_offsets partition of a group, as Kafka
// computes it: Utils.abs(groupId.hashCode) % partitions, where Utils.abs
// maps Integer.MIN_VALUE to 0.
func (f Frontend) GroupPartition(group string) int { return groupPartition(group) }

// CommitOffsets commits a group's offsets outside any transaction (Kafka's
// OffsetCommit). They are visible to FetchOffsets on return, which comes
// once the write is durable under the partition's sync policy.
func (f Frontend) CommitOffsets(group string, offsets map[TopicPartition]OffsetAndMetadata) error {
	return f.e.commitOffsets(group, offsets, false)
}

// TxnCommitOffsets commits a group's offsets inside producer pid's
// transaction (Kafka's TxnOffsetCommit): they stay pending, invisible to
// FetchOffsets and failing it with requireStable, until the transaction
// coordinator writes pid's COMMIT marker to the group's __consumer_offsets
// partition (an ABORT drops them). A fenced epoch fails with the
// producer's ErrInvalidProducerEpoch.
//
// It trusts the caller that the transaction is ongoing with the group's
// partition in it: a front end serving requests uses
// Coordinator.TxnCommitOffsets, which verifies.
func (f Frontend) TxnCommitOffsets(group string, pid int64, epoch int16, offsets map[TopicPartition]OffsetAndMetadata) error {
	return f.e.txnCommitOffsets(group, pid, epoch, offsets, nil)
}

// FetchOffsets returns a group's committed offsets for tps (all of the
// group's when tps is nil); a partition without one has offset -1. With
// requireStable, a pending transactional commit of the group on a
// requested partition fails the call with ErrUnstableOffsetCommit.
func (f Frontend) FetchOffsets(group string, tps []TopicPartition, requireStable bool) (map[TopicPartition]OffsetAndMetadata, error) {
	return f.e.fetchOffsets(group, tps, requireStable)
}

// DeleteGroupOffsets deletes every committed offset of a group (Kafka's
// DeleteGroups, and OffsetDelete for all of a group's partitions): it
// writes a tombstone (the offset's key with a null value) for each to the
// group's __consumer_offsets partition and, once that is durable under the
// partition's sync policy, drops them, so FetchOffsets answers -1. had
// reports whether the group had any committed offset; without one nothing
// is written. Whether the group may be deleted (no members: Kafka's
// NON_EMPTY_GROUP) is the group coordinator's call.
//
// Pending transactional offsets are left alone: they become current if
// their transaction commits, as in Kafka, whose log replay applies a
// COMMIT marker's offsets after an earlier tombstone.
func (f Frontend) DeleteGroupOffsets(group string) (had bool, err error) {
	return f.e.deleteGroupOffsets(group)
}

// GroupHasOffsets reports whether a group has committed offsets, or
// transactional ones pending (Kafka's GroupMetadata.hasOffsets). It is
// false for an empty group id, or when the store cannot open.
func (f Frontend) GroupHasOffsets(group string) bool { return f.e.groupHasOffsets(group) }

// OffsetGroups returns, sorted, every group with committed offsets or
// transactional ones pending (those for which GroupHasOffsets is true):
// the groups that outlive their members, as Kafka's coordinator keeps
// them loaded from its offsets topic.
func (f Frontend) OffsetGroups() ([]string, error) { return f.e.offsetGroups() }

// TopicID returns a topic's id.
func (f Frontend) TopicID(topic string) ([16]byte, bool) { return f.e.topicIDOf(topic) }

// TopicByID returns the topic with an id.
func (f Frontend) TopicByID(id [16]byte) (string, bool) { return f.e.topicByID(id) }

// TopicIDString is the text form of a topic id, Kafka's Uuid.toString:
// base64url without padding (22 characters).
func (f Frontend) TopicIDString(id [16]byte) string { return topicIDString(id) }

// TopicConfig returns every topic config of a topic, sorted by name: the
// topic's override where it has one, else the engine's value (from its
// Options where they set it, else Kafka's default). Internal topics show
// their retention off and cleanup.policy=compact, as they keep them.
func (f Frontend) TopicConfig(topic string) ([]ConfigEntry, error) { return f.e.topicConfig(topic) }

// DefaultTopicConfig returns what TopicConfig shows for a topic that sets
// nothing: the engine's own values, sorted by name.
func (f Frontend) DefaultTopicConfig() []ConfigEntry { return f.e.defaultTopicConfig() }

// ValidateTopicConfig checks a topic's overrides as Kafka's broker checks
// them: known names (every topic config of Kafka 3.9 and 4.x; see
// topicconfig_defs.go), each value's type and range, and the rules between
// configs. The error is a *ConfigError.
func (f Frontend) ValidateTopicConfig(cfg map[string]string) error { return validateTopicConfig(cfg) }

// IncrementalAlterTopicConfig applies ops to topic's overrides (Kafka's
// IncrementalAlterConfigs): the whole resulting config is validated and,
// unless validateOnly, stored and applied, or nothing changes. APPEND
// starts from the override or, without one, from Kafka's default (not the
// engine's); SUBTRACT may leave "", which is kept as an override.
func (f Frontend) IncrementalAlterTopicConfig(topic string, ops []ConfigOp, validateOnly bool) error {
	return f.e.incrementalAlterTopicConfig(topic, ops, validateOnly)
}

// ReplaceTopicConfig makes cfg topic's overrides, all others removed
// (Kafka's legacy AlterConfigs): validated whole and, unless validateOnly,
// stored and applied, or nothing changes.
func (f Frontend) ReplaceTopicConfig(topic string, cfg map[string]string, validateOnly bool) error {
	return f.e.replaceTopicConfig(topic, cfg, validateOnly)
}

// ApplyRetention applies every partition's retention (time and size; the
// internal topics have none) and returns how many segments were deleted.
// The engine runs it every Options.RetentionInterval by itself; a caller
// with its own clock (Options.Now), or a front end with its own
// maintenance tick, calls it.
func (f Frontend) ApplyRetention() (int, error) { return f.e.applyRetention() }

// ExpireProducers applies producer-id expiry (Options.ProducerIDExpiration)
// to every partition and returns how many producers it dropped, as the
// engine's own maintenance does.
func (f Frontend) ExpireProducers() int { return f.e.expireProducers() }

// Log returns a read-only view of p's log, for metrics, benchmarks and
// lookups a Kafka front end makes (ListOffsets by time).
func (f Frontend) Log(p *Partition) LogView { return LogView{p.log} }

// LogView is a read-only view of a partition's log (package partition):
// its offsets, counters and reads. It has no append: every write goes
// through the partition, which applies the producer rules.
type LogView struct{ l *partition.Log }

// HighWatermark, LogStartOffset, LogEndOffset and RecoveryPoint are the
// log's offsets (RecoveryPoint: the offset below which the log is synced).
func (v LogView) HighWatermark() int64  { return v.l.HighWatermark() }
func (v LogView) LogStartOffset() int64 { return v.l.LogStartOffset() }
func (v LogView) LogEndOffset() int64   { return v.l.LogEndOffset() }
func (v LogView) RecoveryPoint() int64  { return v.l.RecoveryPoint() }

// Dir is the partition's directory.
func (v LogView) Dir() string { return v.l.Dir() }

// Syncs is how many syncs the log made; Recycled how many segment files
// it reused (segment.Recycle); ActiveRecycled whether the active segment
// is one of them.
func (v LogView) Syncs() int64         { return v.l.Syncs() }
func (v LogView) Recycled() int64      { return v.l.Recycled() }
func (v LogView) ActiveRecycled() bool { return v.l.ActiveRecycled() }

// MustWait reports whether an append must wait for a sync before it is
// acknowledged (SyncAlways).
func (v LogView) MustWait() bool { return v.l.MustWait() }

// SegmentBases returns the base offsets of the log's segments, oldest first.
func (v LogView) SegmentBases() []int64 { return v.l.SegmentBases() }

// OffsetForTime returns the offset of the first batch whose max timestamp
// is at least ts, by the time index (partition.Log.OffsetForTime).
func (v LogView) OffsetForTime(ts int64) (int64, error) { return v.l.OffsetForTime(ts) }

// AbortedTxns appends to dst the aborted transactions that overlap
// [fetchOffset, upper) (partition.Log.AbortedTxns).
func (v LogView) AbortedTxns(fetchOffset, upper int64, dst []txnindex.Entry) []txnindex.Entry {
	return v.l.AbortedTxns(fetchOffset, upper, dst)
}

// Flush writes the log's buffered bytes to its files and syncs them.
func (v LogView) Flush() error { return v.l.Flush() }
