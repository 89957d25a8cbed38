package sink

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
)

// memStore is an in-memory Store for tests: effects are idempotency keys
// counted per application, positions a map per group. fail, when set, is
// asked at each step of a transaction and makes the step fail with what
// it returns:
//
//   - "begin": Begin fails;
//   - "set-position": SetPosition fails;
//   - "commit": Commit discards the transaction and fails, as a process
//     that dies before its commit reaches the store;
//   - "commit-reply": Commit applies the transaction and then fails, as a
//     commit whose acknowledgement is lost.
type memStore struct {
	mu        sync.Mutex
	applied   map[string]int
	positions map[string]map[TopicPartition]int64
	commits   int
	fail      func(step string) error
}

func newMemStore() *memStore {
	return &memStore{applied: map[string]int{}, positions: map[string]map[TopicPartition]int64{}}
}

// errInjected is the error memStore's fail knob returns in tests.
var errInjected = errors.New("injected failure")

func (s *memStore) check(step string) error {
	if s.fail == nil {
		return nil
	}
	return s.fail(step)
}

func (s *memStore) Positions(_ context.Context, group string) (map[TopicPartition]int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.positions[group]), nil
}

func (s *memStore) Begin(context.Context) (*memTx, error) {
	if err := s.check("begin"); err != nil {
		return nil, err
	}
	return &memTx{s: s, positions: map[TopicPartition]int64{}}, nil
}

// snapshot returns copies of the committed effects and group's positions.
func (s *memStore) snapshot(group string) (map[string]int, map[TopicPartition]int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.applied), maps.Clone(s.positions[group])
}

// memTx buffers a transaction's effects and positions until Commit.
type memTx struct {
	s         *memStore
	group     string
	effects   []string
	positions map[TopicPartition]int64
	prev      map[TopicPartition]int64
	done      bool
}

// apply is the effect a handler makes: one application of key.
func (t *memTx) apply(key string) { t.effects = append(t.effects, key) }

func (t *memTx) SetPosition(_ context.Context, group string, tp TopicPartition, prev, next int64) error {
	if err := t.s.check("set-position"); err != nil {
		return err
	}
	t.s.mu.Lock()
	cur, ok := t.s.positions[group][tp]
	t.s.mu.Unlock()
	if !ok {
		cur = -1
	}
	if cur != prev {
		return fmt.Errorf("cannot move %v from %d (stored %d): %w", tp, prev, cur, ErrPositionConflict)
	}
	if t.prev == nil {
		t.prev = map[TopicPartition]int64{}
	}
	t.group = group
	t.positions[tp] = next
	t.prev[tp] = prev
	return nil
}

func (t *memTx) Commit() error {
	if t.done {
		return errors.New("transaction already ended")
	}
	t.done = true
	if err := t.s.check("commit"); err != nil {
		return err
	}
	t.s.mu.Lock()
	// The positions are checked again at commit, as a database's row
	// lock or serialization check would: a concurrent commit since
	// SetPosition fails this one.
	for tp, prev := range t.prev {
		cur, ok := t.s.positions[t.group][tp]
		if !ok {
			cur = -1
		}
		if cur != prev {
			t.s.mu.Unlock()
			return fmt.Errorf("cannot commit %v: %w", tp, ErrPositionConflict)
		}
	}
	for _, k := range t.effects {
		t.s.applied[k]++
	}
	if len(t.positions) > 0 && t.s.positions[t.group] == nil {
		t.s.positions[t.group] = map[TopicPartition]int64{}
	}
	maps.Copy(t.s.positions[t.group], t.positions)
	t.s.commits++
	t.s.mu.Unlock()
	return t.s.check("commit-reply")
}

func (t *memTx) Rollback() error {
	if t.done {
		return nil
	}
	t.done = true
	return nil
}
