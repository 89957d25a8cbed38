package sink

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/idemlog/idemlog/errcode"
)

var (
	// ErrPositionConflict: the position stored for a partition is not the
	// one this sink last stored or read, so another instance of the same
	// group moved it. The transaction is rolled back; the next Poll reads
	// the positions again.
	ErrPositionConflict = errcode.New(errcode.ConcurrentTransactions, "stored position moved by another sink of the group")
	// ErrInvalidConfig: a sink or store was configured with an empty
	// group, a nil source, store or handler, or an invalid table name.
	ErrInvalidConfig = errcode.New(errcode.InvalidRequest, "invalid sink configuration")
)

// FromStart is the offset Source.Seek takes for "the partition's first
// retained record": where a partition with no stored position starts.
const FromStart int64 = -1

// TopicPartition names one partition of a topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Position is the offset after the last record a source returned for a
// partition: the offset that partition's next read starts at.
type Position struct {
	TopicPartition
	Next int64
}

// Header is a record header; a header's value may be nil.
type Header struct {
	Key, Value []byte
}

// Record is one committed record handed to a Handler. Its slices are valid
// only during the handler's call: copy what must outlive it.
type Record struct {
	TopicPartition
	Offset    int64
	Timestamp int64 // milliseconds since the epoch, as the producer stamped it
	Key       []byte
	Value     []byte
	Headers   []Header
}

// IdempotencyKey returns "topic/partition/offset", the same string every
// time the record is delivered, for a side effect that cannot join the
// store's transaction (see the package doc, Idempotency keys, for what it
// guarantees). Kafka topic names cannot contain '/', so two records never
// share a key while their topic exists.
func (r *Record) IdempotencyKey() string {
	return string(r.AppendIdempotencyKey(make([]byte, 0, len(r.Topic)+24)))
}

// AppendIdempotencyKey appends the record's IdempotencyKey to dst.
func (r *Record) AppendIdempotencyKey(dst []byte) []byte {
	dst = append(dst, r.Topic...)
	dst = append(dst, '/')
	dst = strconv.AppendInt(dst, int64(r.Partition), 10)
	dst = append(dst, '/')
	return strconv.AppendInt(dst, r.Offset, 10)
}

// Fetched is what one Source.Fetch returned. A source fills it with Add
// and SetNext; it reuses its memory from one fetch to the next.
type Fetched struct {
	// Records are the committed records read, grouped by partition and in
	// offset order within each partition.
	Records []Record
	// Next has one entry per partition whose position moved: past its
	// records, and past aborted records and transaction markers the
	// source skipped (which can move a position with no record).
	Next []Position

	data    []byte
	headers []Header
}

// Reset empties f, keeping its memory.
func (f *Fetched) Reset() {
	f.Records = f.Records[:0]
	f.Next = f.Next[:0]
	f.data = f.data[:0]
	f.headers = f.headers[:0]
}

// Add appends a copy of r (its key, value and headers copied into f's
// memory, so the source may reuse its buffers).
func (f *Fetched) Add(r *Record) {
	c := *r
	c.Key = f.copyBytes(r.Key)
	c.Value = f.copyBytes(r.Value)
	if len(r.Headers) > 0 {
		start := len(f.headers)
		for _, h := range r.Headers {
			f.headers = append(f.headers, Header{Key: f.copyBytes(h.Key), Value: f.copyBytes(h.Value)})
		}
		c.Headers = f.headers[start:len(f.headers):len(f.headers)]
	}
	f.Records = append(f.Records, c)
}

// SetNext records that tp's next read starts at next.
func (f *Fetched) SetNext(tp TopicPartition, next int64) {
	for i := range f.Next {
		if f.Next[i].TopicPartition == tp {
			f.Next[i].Next = next
			return
		}
	}
	f.Next = append(f.Next, Position{TopicPartition: tp, Next: next})
}

// size is how many key, value and header bytes f holds.
func (f *Fetched) size() int { return len(f.data) }

// copyBytes copies b into f.data and returns the copy, nil for nil. A
// growth of f.data leaves earlier copies in the old array, still valid.
func (f *Fetched) copyBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	start := len(f.data)
	f.data = append(f.data, b...)
	return f.data[start:len(f.data):len(f.data)]
}

// Source reads the committed records (read_committed: no record of an
// aborted or still open transaction, no transaction marker) of a fixed set
// of partitions, each in offset order, from a position the sink sets.
// EngineSource reads an embedded engine; a Kafka client (franz-go's kgo
// consuming with kgo.FetchIsolationLevel(kgo.ReadCommitted()) and
// ConsumePartitions) can implement it for a broker. Not used concurrently.
type Source interface {
	// Partitions lists the partitions the source reads.
	Partitions() []TopicPartition
	// Seek makes the next Fetch read tp from offset (FromStart: the
	// first retained record). The sink seeks every partition before its
	// first Fetch, and again after a rolled-back transaction.
	Seek(tp TopicPartition, offset int64) error
	// Fetch resets f and fills it with the next records, waiting until
	// some partition's position can move or ctx is done (then it returns
	// ctx.Err(), unwrapped). It may return with no record and no position
	// moved.
	Fetch(ctx context.Context, f *Fetched) error
}

// Tx is one transaction of the external store: the handler writes its
// effects through it, and the sink records positions in it before it
// commits.
type Tx interface {
	// SetPosition records that group's next offset in tp is next,
	// provided the stored one is still prev (-1: none stored); otherwise
	// it fails with ErrPositionConflict, and the transaction must roll
	// back.
	SetPosition(ctx context.Context, group string, tp TopicPartition, prev, next int64) error
	// Commit makes the handler's writes and the positions durable
	// together, or neither.
	Commit() error
	// Rollback discards them.
	Rollback() error
}

// Store is an external store whose transactions carry both the effects
// and the positions.
type Store[T Tx] interface {
	// Positions returns group's stored next offsets; a partition with no
	// stored position is absent.
	Positions(ctx context.Context, group string) (map[TopicPartition]int64, error)
	// Begin starts a transaction.
	Begin(ctx context.Context) (T, error)
}

// Handler applies records to the store through tx. recs holds the records
// of one fetch (one or more partitions, each in offset order); an error
// rolls the transaction back, effects and positions alike.
type Handler[T Tx] func(ctx context.Context, tx T, recs []Record) error

// PerRecord turns a function of one record into a Handler that calls it
// for each record of the fetch, in order, inside the same transaction.
func PerRecord[T Tx](fn func(ctx context.Context, tx T, r *Record) error) Handler[T] {
	return func(ctx context.Context, tx T, recs []Record) error {
		for i := range recs {
			if err := fn(ctx, tx, &recs[i]); err != nil {
				return err
			}
		}
		return nil
	}
}

// Sink is the loop: it reads records from a Source and applies them to a
// Store with a Handler, one transaction per fetch, each transaction
// carrying the positions after its records. Not safe for concurrent use.
type Sink[T Tx] struct {
	src   Source
	store Store[T]
	group string
	fn    Handler[T]

	// stored holds the positions the store holds for the group, as this
	// sink last read or committed them; loaded is false until they have
	// been read (again, after a failed transaction).
	stored  map[TopicPartition]int64
	loaded  bool
	fetched Fetched
}

// New returns a sink of group (the name its positions are stored under:
// one sink of a group at a time) that reads src and applies the records
// to store through fn.
func New[T Tx](src Source, store Store[T], group string, fn Handler[T]) (*Sink[T], error) {
	if src == nil || store == nil || fn == nil || group == "" {
		return nil, fmt.Errorf("cannot create sink %q: needs a group, a source, a store and a handler: %w", group, ErrInvalidConfig)
	}
	return &Sink[T]{src: src, store: store, group: group, fn: fn, stored: map[TopicPartition]int64{}}, nil
}

// Run calls Poll until ctx is done (it then returns ctx's error) or Poll
// fails (it returns that error). A failed Run has rolled its transaction
// back; calling Run again resumes from the positions in the store.
func (s *Sink[T]) Run(ctx context.Context) error {
	for {
		if _, err := s.Poll(ctx); err != nil {
			return err
		}
	}
}

// Poll waits for the next records (reading the positions from the store
// first, if it has not yet or a transaction failed since) and applies them
// in one transaction that also stores the positions after them. It
// returns how many records it applied. On an error nothing of the
// transaction is kept, unless Commit's own error hides a commit that
// happened; either way the next Poll reads the positions from the store
// again and seeks the source to them, so it resumes where the store is.
// If ctx ends while the source waits for records, Poll returns the
// source's error as it is (ctx.Err() itself from EngineSource): no
// transaction was begun. Errors of the transaction's steps are wrapped
// ("cannot ...: %w"), so a caller can tell an idle wait from a failure.
func (s *Sink[T]) Poll(ctx context.Context) (int, error) {
	if !s.loaded {
		if err := s.load(ctx); err != nil {
			return 0, err
		}
	}
	if err := s.src.Fetch(ctx, &s.fetched); err != nil {
		s.loaded = false
		return 0, err
	}
	if len(s.fetched.Records) == 0 {
		// Only aborted records or markers were passed: nothing to apply,
		// and re-reading them after a restart applies nothing either, so
		// the position is stored with the next records.
		return 0, nil
	}
	if err := s.apply(ctx); err != nil {
		s.loaded = false
		return 0, err
	}
	return len(s.fetched.Records), nil
}

// load reads the group's positions from the store and seeks the source
// to them (FromStart where none is stored).
func (s *Sink[T]) load(ctx context.Context) error {
	pos, err := s.store.Positions(ctx, s.group)
	if err != nil {
		return fmt.Errorf("cannot read positions of group %q: %w", s.group, err)
	}
	clear(s.stored)
	for _, tp := range s.src.Partitions() {
		off, ok := pos[tp]
		if ok {
			s.stored[tp] = off
		} else {
			off = FromStart
		}
		if err := s.src.Seek(tp, off); err != nil {
			return fmt.Errorf("cannot seek %s-%d to %d: %w", tp.Topic, tp.Partition, off, err)
		}
	}
	s.loaded = true
	return nil
}

// apply runs the handler and stores the positions in one transaction.
func (s *Sink[T]) apply(ctx context.Context) error {
	tx, err := s.store.Begin(ctx)
	if err != nil {
		return fmt.Errorf("cannot begin transaction: %w", err)
	}
	if err := s.fn(ctx, tx, s.fetched.Records); err != nil {
		return rollback(tx, fmt.Errorf("cannot apply %d records: %w", len(s.fetched.Records), err))
	}
	for _, p := range s.fetched.Next {
		prev, ok := s.stored[p.TopicPartition]
		if !ok {
			prev = -1
		}
		if p.Next == prev {
			continue
		}
		if err := tx.SetPosition(ctx, s.group, p.TopicPartition, prev, p.Next); err != nil {
			return rollback(tx, fmt.Errorf("cannot store position %d of %s-%d: %w", p.Next, p.Topic, p.Partition, err))
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("cannot commit %d records: %w", len(s.fetched.Records), err)
	}
	for _, p := range s.fetched.Next {
		s.stored[p.TopicPartition] = p.Next
	}
	return nil
}

// rollback rolls tx back and returns err, joined with the rollback's own
// error if it had one.
func rollback(tx Tx, err error) error {
	if rerr := tx.Rollback(); rerr != nil {
		return errors.Join(err, fmt.Errorf("cannot roll back: %w", rerr))
	}
	return err
}
