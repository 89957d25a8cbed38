package interop

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/sink"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kgoSource is a sink.Source over a Kafka-protocol broker through
// franz-go: direct partition consuming at read_committed, positions set by
// the sink, never committed to the broker. Out-of-range offsets are an
// error (NoResetOffset), not a silent jump.
type kgoSource struct {
	cl      *kgo.Client
	tps     []sink.TopicPartition
	pending map[string]map[int32]kgo.Offset // seeks to apply before the next fetch
	started bool
}

func newKgoSource(addr, topic string, partitions int32) (*kgoSource, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		return nil, err
	}
	s := &kgoSource{cl: cl, pending: map[string]map[int32]kgo.Offset{}}
	for p := range partitions {
		s.tps = append(s.tps, sink.TopicPartition{Topic: topic, Partition: p})
	}
	return s, nil
}

func (s *kgoSource) Partitions() []sink.TopicPartition { return s.tps }

func (s *kgoSource) Seek(tp sink.TopicPartition, offset int64) error {
	o := kgo.NewOffset().AtStart()
	if offset != sink.FromStart {
		o = kgo.NewOffset().At(offset)
	}
	if s.pending[tp.Topic] == nil {
		s.pending[tp.Topic] = map[int32]kgo.Offset{}
	}
	s.pending[tp.Topic][tp.Partition] = o
	return nil
}

// Fetch applies pending seeks by removing and re-adding the partitions
// (which drops the client's buffered fetches for them, so nothing from
// before the seek is returned), then polls once.
func (s *kgoSource) Fetch(ctx context.Context, f *sink.Fetched) error {
	f.Reset()
	if len(s.pending) > 0 {
		if s.started {
			rm := map[string][]int32{}
			for topic, parts := range s.pending {
				for p := range parts {
					rm[topic] = append(rm[topic], p)
				}
			}
			s.cl.RemoveConsumePartitions(rm)
		}
		s.cl.AddConsumePartitions(s.pending)
		s.pending = map[string]map[int32]kgo.Offset{}
		s.started = true
	}
	fetches := s.cl.PollFetches(ctx)
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, fe := range fetches.Errors() {
		return fmt.Errorf("cannot fetch %s-%d: %w", fe.Topic, fe.Partition, fe.Err)
	}
	var r sink.Record
	fetches.EachPartition(func(p kgo.FetchTopicPartition) {
		if len(p.Records) == 0 {
			return
		}
		for _, kr := range p.Records {
			r = sink.Record{TopicPartition: sink.TopicPartition{Topic: kr.Topic, Partition: kr.Partition},
				Offset: kr.Offset, Timestamp: kr.Timestamp.UnixMilli(), Key: kr.Key, Value: kr.Value}
			f.Add(&r)
		}
		f.SetNext(sink.TopicPartition{Topic: p.Topic, Partition: p.Partition}, p.Records[len(p.Records)-1].Offset+1)
	})
	return nil
}

// keyStore is a sink.Store in memory: effects are idempotency keys
// counted per application.
type keyStore struct {
	mu        sync.Mutex
	applied   map[string]int
	positions map[sink.TopicPartition]int64
}

type keyTx struct {
	s         *keyStore
	keys      []string
	positions map[sink.TopicPartition]int64
}

func (s *keyStore) Positions(context.Context, string) (map[sink.TopicPartition]int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.positions), nil
}

func (s *keyStore) Begin(context.Context) (*keyTx, error) {
	return &keyTx{s: s, positions: map[sink.TopicPartition]int64{}}, nil
}

func (t *keyTx) SetPosition(_ context.Context, _ string, tp sink.TopicPartition, prev, next int64) error {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	cur, ok := t.s.positions[tp]
	if !ok {
		cur = -1
	}
	if cur != prev {
		return sink.ErrPositionConflict
	}
	t.positions[tp] = next
	return nil
}

func (t *keyTx) Commit() error {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	for _, k := range t.keys {
		t.s.applied[k]++
	}
	maps.Copy(t.s.positions, t.positions)
	return nil
}

func (t *keyTx) Rollback() error { return nil }

// TestSinkThroughKgoSource runs package sink over the Kafka listener with
// franz-go as its source: committed transfers are applied once, aborted
// ones never; a handler failure rolls back and the re-sought client
// delivers the same records again; a new client resumes from the store's
// positions, not from the start.
func TestSinkThroughKgoSource(t *testing.T) {
	e, addr := saramaServer(t)
	if err := e.CreateTopic("sinked", 2); err != nil {
		t.Fatal(err)
	}
	tp, err := e.NewTransactionalProducer("sink-upstream", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	wantPos := map[sink.TopicPartition]int64{}
	produce := func(txns int) {
		bld := batch.NewBuilder(batch.CodecNone)
		for i := range txns {
			var keys []string
			var ends [2]int64
			for part := range 2 {
				p, _ := e.Partition("sinked", part)
				bld.Reset(batch.CodecNone)
				bld.Append(time.Now().UnixMilli(), nil, fmt.Appendf(nil, "r%d", i), nil)
				bld.Append(time.Now().UnixMilli(), nil, fmt.Appendf(nil, "s%d", i), nil)
				res, err := tp.Send(p, bld)
				if err != nil {
					t.Fatal(err)
				}
				for o := res.BaseOffset; o <= res.LastOffset; o++ {
					keys = append(keys, fmt.Sprintf("sinked/%d/%d", part, o))
				}
				ends[part] = res.LastOffset + 1
			}
			if i%3 == 2 {
				err = tp.Abort()
			} else {
				err = tp.Commit()
				want = append(want, keys...)
				for part, end := range ends {
					wantPos[sink.TopicPartition{Topic: "sinked", Partition: int32(part)}] = end
				}
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(15)

	store := &keyStore{applied: map[string]int{}, positions: map[sink.TopicPartition]int64{}}
	// The first transaction of each run fails: the sink rolls back and
	// seeks the client back (to the start, then to a stored position).
	failNext, failures := true, 0
	handler := func(_ context.Context, tx *keyTx, recs []sink.Record) error {
		for i := range recs {
			tx.keys = append(tx.keys, recs[i].IdempotencyKey())
		}
		if failNext {
			failNext = false
			failures++
			return errHandlerFailure
		}
		return nil
	}
	run := func() {
		src, err := newKgoSource(addr, "sinked", 2)
		if err != nil {
			t.Fatal(err)
		}
		defer src.cl.Close()
		s, err := sink.New(src, store, "g", handler)
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for applied := 0; ; {
			store.mu.Lock()
			applied = len(store.applied)
			store.mu.Unlock()
			if applied == len(want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d records applied after 30 s", applied, len(want))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := s.Poll(ctx)
			cancel()
			if err != nil && !errors.Is(err, errHandlerFailure) {
				t.Fatal(err)
			}
		}
	}
	run()
	produce(6)
	failNext = true
	run() // a new client: resumes from the store's positions
	if failures != 2 {
		t.Fatalf("%d handler failures injected, want 2", failures)
	}
	for _, k := range want {
		if store.applied[k] != 1 {
			t.Errorf("record %s applied %d times", k, store.applied[k])
		}
	}
	if len(store.applied) != len(want) {
		t.Errorf("%d records applied, want %d (aborted ones included?)", len(store.applied), len(want))
	}
	if !maps.Equal(store.positions, wantPos) {
		t.Errorf("stored positions %v, want %v", store.positions, wantPos)
	}
}

// errHandlerFailure is the failure TestSinkThroughKgoSource injects.
var errHandlerFailure = errors.New("handler failure")
