package sink

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/internal/testutil/enginetest"
)

// openTestEngine opens an engine in a temporary directory with topic
// "t" of the given partitions.
func openTestEngine(t *testing.T, partitions int) *engine.Engine {
	t.Helper()
	e := enginetest.Open(t, "", engine.Options{})
	if err := e.CreateTopic("t", partitions); err != nil {
		t.Fatal(err)
	}
	return e
}

// produce appends n records to t-part through an idempotent producer, in
// batches of perBatch, and returns their idempotency keys.
func produce(t *testing.T, e *engine.Engine, part, n, perBatch int) []string {
	t.Helper()
	p, err := e.Partition("t", part)
	if err != nil {
		t.Fatal(err)
	}
	pr, err := e.NewProducer()
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	bld := batch.NewBuilder(batch.CodecNone)
	for sent := 0; sent < n; {
		bld.Reset(batch.CodecNone)
		k := min(perBatch, n-sent)
		for i := range k {
			bld.Append(time.Now().UnixMilli(), nil, fmt.Appendf(nil, "v%d", sent+i), nil)
		}
		res, err := pr.Send(p, bld)
		if err != nil {
			t.Fatal(err)
		}
		for o := res.BaseOffset; o <= res.LastOffset; o++ {
			keys = append(keys, fmt.Sprintf("t/%d/%d", part, o))
		}
		sent += k
	}
	return keys
}

// applyKeys is the handler of the tests: each record's effect is one
// application of its idempotency key.
func applyKeys(_ context.Context, tx *memTx, recs []Record) error {
	for i := range recs {
		tx.apply(recs[i].IdempotencyKey())
	}
	return nil
}

// newTestSink returns a sink of group "g" over all partitions of "t".
func newTestSink(t *testing.T, e *engine.Engine, store *memStore, fn Handler[*memTx]) *Sink[*memTx] {
	t.Helper()
	src, err := NewEngineSource(e, "t")
	if err != nil {
		t.Fatal(err)
	}
	src.MaxBytes = 256 // a few batches per transaction, so that runs take many
	s, err := New(src, store, "g", fn)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// drain polls until a poll finds nothing for 100 ms, and fails the test
// on any other error.
func drain(t *testing.T, s *Sink[*memTx]) {
	t.Helper()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		_, err := s.Poll(ctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// wantOnce fails unless applied holds every key of want exactly once and
// nothing else.
func wantOnce(t *testing.T, applied map[string]int, want []string) {
	t.Helper()
	for _, k := range want {
		if applied[k] != 1 {
			t.Errorf("record %s applied %d times, want 1", k, applied[k])
		}
	}
	if len(applied) != len(want) {
		extra := []string{}
		for k := range applied {
			if !slices.Contains(want, k) {
				extra = append(extra, k)
			}
		}
		t.Errorf("%d records applied, want %d; not expected: %v", len(applied), len(want), extra)
	}
}

func TestPositionCommitsWithEffects(t *testing.T) {
	t.Parallel()
	e := openTestEngine(t, 2)
	want := append(produce(t, e, 0, 40, 3), produce(t, e, 1, 25, 4)...)
	store := newMemStore()
	s := newTestSink(t, e, store, applyKeys)
	drain(t, s)
	applied, pos := store.snapshot("g")
	wantOnce(t, applied, want)
	for part, n := range []int64{40, 25} {
		if got := pos[TopicPartition{"t", int32(part)}]; got != n {
			t.Errorf("stored position of t-%d %d, want %d", part, got, n)
		}
	}
	if store.commits < 2 {
		t.Errorf("%d commits: the run was not split into transactions", store.commits)
	}
}

func TestFailedPositionWriteRollsBackEffects(t *testing.T) {
	t.Parallel()
	e := openTestEngine(t, 1)
	want := produce(t, e, 0, 10, 2)
	store := newMemStore()
	store.fail = func(step string) error {
		if step == "set-position" {
			return errInjected
		}
		return nil
	}
	s := newTestSink(t, e, store, applyKeys)
	if _, err := s.Poll(context.Background()); !errors.Is(err, errInjected) {
		t.Fatalf("poll with a failing position write: %v", err)
	}
	if applied, pos := store.snapshot("g"); len(applied) != 0 || len(pos) != 0 {
		t.Fatalf("after a failed position write the store holds effects %v and positions %v", applied, pos)
	}
	store.fail = nil
	drain(t, s)
	applied, _ := store.snapshot("g")
	wantOnce(t, applied, want)
}

func TestHandlerErrorRollsBackBoth(t *testing.T) {
	t.Parallel()
	e := openTestEngine(t, 1)
	want := produce(t, e, 0, 30, 5)
	store := newMemStore()
	// The handler fails on the first transaction that holds offset 12,
	// after applying the records before it in that transaction.
	failed := false
	fn := func(ctx context.Context, tx *memTx, recs []Record) error {
		for i := range recs {
			if recs[i].Offset == 12 && !failed {
				failed = true
				return errInjected
			}
			tx.apply(recs[i].IdempotencyKey())
		}
		return nil
	}
	s := newTestSink(t, e, store, fn)
	var err error
	for err == nil {
		_, err = s.Poll(context.Background())
	}
	if !errors.Is(err, errInjected) {
		t.Fatal(err)
	}
	applied, pos := store.snapshot("g")
	stored := pos[TopicPartition{"t", 0}]
	if stored > 12 {
		t.Fatalf("position %d stored past the failed record 12", stored)
	}
	// Exactly the records before the stored position are applied: the
	// failed transaction's first records are not.
	wantOnce(t, applied, want[:stored])
	drain(t, s)
	applied, _ = store.snapshot("g")
	wantOnce(t, applied, want)
}

func TestResumeFromStorePositions(t *testing.T) {
	t.Parallel()
	e := openTestEngine(t, 1)
	keys := produce(t, e, 0, 20, 4)
	// The engine's committed offsets for the group say 15; the store says
	// 6 (a mid-batch offset). The store wins.
	tp := engine.TopicPartition{Topic: "t", Partition: 0}
	if err := e.Frontend().CommitOffsets("g", map[engine.TopicPartition]engine.OffsetAndMetadata{tp: {Offset: 15}}); err != nil {
		t.Fatal(err)
	}
	store := newMemStore()
	store.positions["g"] = map[TopicPartition]int64{{"t", 0}: 6}
	s := newTestSink(t, e, store, applyKeys)
	drain(t, s)
	applied, pos := store.snapshot("g")
	wantOnce(t, applied, keys[6:])
	if pos[TopicPartition{"t", 0}] != 20 {
		t.Fatalf("stored position %d, want 20", pos[TopicPartition{"t", 0}])
	}

	// No stored position: from the first record, whatever the engine's
	// committed offsets say.
	other := newMemStore()
	drain(t, newTestSink(t, e, other, applyKeys))
	applied, _ = other.snapshot("g")
	wantOnce(t, applied, keys)
}

func TestAbortedRecordsSkipped(t *testing.T) {
	t.Parallel()
	e := openTestEngine(t, 2)
	p0, _ := e.Partition("t", 0)
	p1, _ := e.Partition("t", 1)
	tp, err := e.NewTransactionalProducer("writer", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	bld := batch.NewBuilder(batch.CodecNone)
	for i := range 12 {
		var sent []string
		for _, p := range []*engine.Partition{p0, p1} {
			bld.Reset(batch.CodecNone)
			for j := range 3 {
				bld.Append(time.Now().UnixMilli(), nil, fmt.Appendf(nil, "txn%d-%d", i, j), nil)
			}
			res, err := tp.Send(p, bld)
			if err != nil {
				t.Fatal(err)
			}
			for o := res.BaseOffset; o <= res.LastOffset; o++ {
				sent = append(sent, fmt.Sprintf("t/%d/%d", p.Index(), o))
			}
		}
		if i%3 == 1 {
			err = tp.Abort()
		} else {
			err = tp.Commit()
			want = append(want, sent...)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	store := newMemStore()
	drain(t, newTestSink(t, e, store, applyKeys))
	applied, _ := store.snapshot("g")
	wantOnce(t, applied, want)

	// An open transaction's records are not applied until it commits.
	bld.Reset(batch.CodecNone)
	bld.Append(time.Now().UnixMilli(), nil, []byte("open"), nil)
	res, err := tp.Send(p0, bld)
	if err != nil {
		t.Fatal(err)
	}
	s := newTestSink(t, e, store, applyKeys)
	drain(t, s)
	if applied, _ := store.snapshot("g"); len(applied) != len(want) {
		t.Fatalf("%d records applied with a transaction open, want %d", len(applied), len(want))
	}
	if err := tp.Commit(); err != nil {
		t.Fatal(err)
	}
	drain(t, s)
	applied, _ = store.snapshot("g")
	wantOnce(t, applied, append(want, fmt.Sprintf("t/0/%d", res.BaseOffset)))
}

func TestRestartAfterCrashBeforeCommit(t *testing.T) {
	t.Parallel()
	e := openTestEngine(t, 1)
	want := produce(t, e, 0, 30, 3)
	store := newMemStore()
	// The third transaction's effects are made, then the process "dies"
	// before its commit reaches the store: the sink is abandoned.
	commits := 0
	store.fail = func(step string) error {
		if step == "commit" {
			if commits++; commits == 3 {
				return errInjected
			}
		}
		return nil
	}
	s := newTestSink(t, e, store, applyKeys)
	var err error
	for err == nil {
		_, err = s.Poll(context.Background())
	}
	if !errors.Is(err, errInjected) {
		t.Fatal(err)
	}
	applied, pos := store.snapshot("g")
	wantOnce(t, applied, want[:pos[TopicPartition{"t", 0}]])
	drain(t, newTestSink(t, e, store, applyKeys))
	applied, _ = store.snapshot("g")
	wantOnce(t, applied, want)
}

func TestRestartAfterLostCommitReply(t *testing.T) {
	t.Parallel()
	e := openTestEngine(t, 1)
	want := produce(t, e, 0, 30, 3)
	store := newMemStore()
	// The second commit happens, but its reply is lost: the sink sees an
	// error and must not apply that transaction's records again.
	commits := 0
	store.fail = func(step string) error {
		if step == "commit-reply" {
			if commits++; commits == 2 {
				return errInjected
			}
		}
		return nil
	}
	s := newTestSink(t, e, store, applyKeys)
	var err error
	for err == nil {
		_, err = s.Poll(context.Background())
	}
	if !errors.Is(err, errInjected) {
		t.Fatal(err)
	}
	// The same sink goes on: its next Poll reads the positions again.
	drain(t, s)
	applied, _ := store.snapshot("g")
	wantOnce(t, applied, want)
}

func TestConcurrentSinkConflicts(t *testing.T) {
	t.Parallel()
	e := openTestEngine(t, 1)
	want := produce(t, e, 0, 20, 2)
	store := newMemStore()
	a := newTestSink(t, e, store, applyKeys)
	b := newTestSink(t, e, store, applyKeys)
	if _, err := a.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	// b reads a's position and moves it on.
	if _, err := b.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	// a still believes its own position is stored: it re-reads the
	// records b applied, and its position update must fail, taking its
	// effects with it.
	if _, err := a.Poll(context.Background()); !errors.Is(err, ErrPositionConflict) {
		t.Fatalf("sink whose stored position another sink moved: %v, want ErrPositionConflict", err)
	}
	// a goes on from the store's positions; then b, behind, conflicts in
	// turn, and after that finds nothing left to apply.
	drain(t, a)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := b.Poll(ctx); !errors.Is(err, ErrPositionConflict) {
		t.Fatalf("sink behind the store's positions: %v, want ErrPositionConflict", err)
	}
	drain(t, b)
	applied, _ := store.snapshot("g")
	wantOnce(t, applied, want)
}

// TestRandomFailuresApplyOnce injects failures at random steps of random
// transactions, restarting the sink (a new source and sink over the same
// store, as a restarted process) after each, while records keep arriving;
// every record must end up applied exactly once.
func TestRandomFailuresApplyOnce(t *testing.T) {
	t.Parallel()
	e := openTestEngine(t, 3)
	rng := rand.New(rand.NewPCG(1, 2))
	store := newMemStore()
	steps := []string{"begin", "set-position", "commit", "commit-reply"}
	store.fail = func(step string) error {
		if rng.IntN(2) == 0 && step == steps[rng.IntN(len(steps))] {
			return errInjected
		}
		return nil
	}
	var want []string
	failures := 0
	for range 40 {
		for part := range 3 {
			want = append(want, produce(t, e, part, rng.IntN(6), 1+rng.IntN(3))...)
		}
		s := newTestSink(t, e, store, applyKeys)
		for range 5 {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			_, err := s.Poll(ctx)
			cancel()
			if errors.Is(err, errInjected) {
				failures++
				break
			}
			if err != nil && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatal(err)
			}
		}
	}
	store.fail = nil
	drain(t, newTestSink(t, e, store, applyKeys))
	applied, _ := store.snapshot("g")
	wantOnce(t, applied, want)
	if failures < 10 {
		t.Fatalf("only %d failures injected", failures)
	}
}

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	r := Record{TopicPartition: TopicPartition{"orders.eu", 7}, Offset: 1234}
	if got := r.IdempotencyKey(); got != "orders.eu/7/1234" {
		t.Fatalf("key %q", got)
	}
	if got := string(r.AppendIdempotencyKey([]byte("x:"))); got != "x:orders.eu/7/1234" {
		t.Fatalf("appended key %q", got)
	}

	// A record delivered again after a rolled-back transaction gets the
	// same key as the first time.
	e := openTestEngine(t, 1)
	produce(t, e, 0, 5, 5)
	var seen [][]string
	fail := true
	fn := func(ctx context.Context, tx *memTx, recs []Record) error {
		var keys []string
		for i := range recs {
			keys = append(keys, recs[i].IdempotencyKey())
		}
		seen = append(seen, keys)
		if fail {
			fail = false
			return errInjected
		}
		return nil
	}
	s := newTestSink(t, e, newMemStore(), fn)
	if _, err := s.Poll(context.Background()); !errors.Is(err, errInjected) {
		t.Fatal(err)
	}
	if _, err := s.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 || !slices.Equal(seen[0], seen[1]) || len(seen[0]) != 5 {
		t.Fatalf("keys per delivery %v, want the same five twice", seen)
	}
}

func TestPerRecord(t *testing.T) {
	t.Parallel()
	var got []int64
	h := PerRecord(func(_ context.Context, _ *memTx, r *Record) error {
		if r.Offset == 3 {
			return errInjected
		}
		got = append(got, r.Offset)
		return nil
	})
	recs := []Record{{Offset: 1}, {Offset: 2}, {Offset: 3}, {Offset: 4}}
	if err := h(context.Background(), nil, recs); !errors.Is(err, errInjected) {
		t.Fatal(err)
	}
	if !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("records handled %v, want 1 2 then the error", got)
	}
}

func TestNewRejectsIncompleteConfig(t *testing.T) {
	t.Parallel()
	e := openTestEngine(t, 1)
	src, _ := NewEngineSource(e, "t")
	if _, err := New(src, newMemStore(), "", applyKeys); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("empty group: %v", err)
	}
	if _, err := New[*memTx](nil, newMemStore(), "g", applyKeys); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("nil source: %v", err)
	}
	if _, err := New(src, newMemStore(), "g", nil); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("nil handler: %v", err)
	}
}
