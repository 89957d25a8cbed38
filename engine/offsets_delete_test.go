package engine

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/producer"
)

// sameOffsetsPartition returns a group other than group in its
// __consumer_offsets partition.
func sameOffsetsPartition(group string) string {
	for i := 0; ; i++ {
		if h := fmt.Sprintf("other-%d", i); groupPartition(h) == groupPartition(group) {
			return h
		}
	}
}

func TestDeleteGroupOffsets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	const g = "g"
	h := sameOffsetsPartition(g)
	t0, t1 := TopicPartition{"orders", 0}, TopicPartition{"orders", 1}
	if err := e.Frontend().CommitOffsets(g, map[TopicPartition]OffsetAndMetadata{t0: {10, "a"}, t1: {20, "b"}}); err != nil {
		t.Fatal(err)
	}
	if err := e.Frontend().CommitOffsets(h, map[TopicPartition]OffsetAndMetadata{t0: {5, "h"}}); err != nil {
		t.Fatal(err)
	}
	if !e.groupHasOffsets(g) || !e.groupHasOffsets(h) || e.groupHasOffsets("nobody") || e.groupHasOffsets("") {
		t.Fatal("GroupHasOffsets before the delete")
	}
	p := offsetsPart(t, e, g)
	hw := p.log.HighWatermark()
	had, err := e.deleteGroupOffsets(g)
	if err != nil || !had {
		t.Fatalf("delete: %v %v", had, err)
	}
	// One plain batch of tombstones: the keys with null values.
	c, err := p.log.Read(hw, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	b := batch.Batch(c.Data)
	if b.ProducerID() != -1 || b.IsTransactional() || b.RecordsCount() != 2 || c.NextOffset != hw+2 {
		t.Fatalf("tombstone batch: pid %d txn %v records %d next %d", b.ProducerID(), b.IsTransactional(), b.RecordsCount(), c.NextOffset)
	}
	var dec batch.Decoder
	recs, err := dec.Records(b)
	if err != nil {
		t.Fatal(err)
	}
	var r batch.Record
	for _, tp := range []TopicPartition{t0, t1} {
		if !recs.Next(&r) {
			t.Fatal(recs.Err())
		}
		if string(r.Key) != string(encodeOffsetKey(nil, g, tp)) || r.Value != nil {
			t.Fatalf("tombstone for %v: key %x value %x", tp, r.Key, r.Value)
		}
	}
	c.Release()
	gone := func(e *Engine) {
		t.Helper()
		wantOffsets(t, e, g, true, map[TopicPartition]OffsetAndMetadata{t0: {-1, ""}, t1: {-1, ""}})
		if all, err := e.fetchOffsets(g, nil, true); err != nil || len(all) != 0 {
			t.Fatalf("all offsets of a deleted group: %v %v", all, err)
		}
		if e.groupHasOffsets(g) {
			t.Fatal("GroupHasOffsets after the delete")
		}
		wantOffsets(t, e, h, true, map[TopicPartition]OffsetAndMetadata{t0: {5, "h"}})
	}
	gone(e)
	// Nothing left: nothing written.
	hw = p.log.HighWatermark()
	if had, err := e.deleteGroupOffsets(g); err != nil || had {
		t.Fatalf("second delete: %v %v", had, err)
	}
	if p.log.HighWatermark() != hw {
		t.Fatal("a delete of nothing wrote to the log")
	}
	if _, err := e.deleteGroupOffsets(""); !errors.Is(err, ErrInvalidGroupID) {
		t.Fatalf("empty group: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openEngine(t, dir, Options{})
	gone(e)

	// Commits after a delete count, and survive replays that pass over
	// the tombstones.
	if err := e.Frontend().CommitOffsets(g, map[TopicPartition]OffsetAndMetadata{t1: {25, "c"}}); err != nil {
		t.Fatal(err)
	}
	e.kill()
	e = openEngine(t, dir, Options{})
	wantOffsets(t, e, g, true, map[TopicPartition]OffsetAndMetadata{t0: {-1, ""}, t1: {25, "c"}})

	// Pending transactional offsets are left alone: they become current
	// when their transaction commits, live and after a replay.
	pid, epoch, _ := e.initProducerID()
	if err := e.Frontend().TxnCommitOffsets(g, pid, epoch, map[TopicPartition]OffsetAndMetadata{t0: {30, "txn"}}); err != nil {
		t.Fatal(err)
	}
	if had, err := e.deleteGroupOffsets(g); err != nil || !had {
		t.Fatalf("delete with a pending commit: %v %v", had, err)
	}
	if !e.groupHasOffsets(g) {
		t.Fatal("GroupHasOffsets false with a pending commit")
	}
	if _, err := e.fetchOffsets(g, []TopicPartition{t0}, true); !errors.Is(err, ErrUnstableOffsetCommit) {
		t.Fatalf("pending commit dropped by the delete: %v", err)
	}
	wantOffsets(t, e, g, false, map[TopicPartition]OffsetAndMetadata{t0: {-1, ""}, t1: {-1, ""}})
	// A group with only pending offsets has none to delete.
	pendingOnly := "pending-only"
	if err := e.Frontend().TxnCommitOffsets(pendingOnly, pid, epoch, map[TopicPartition]OffsetAndMetadata{t0: {1, ""}}); err != nil {
		t.Fatal(err)
	}
	if had, err := e.deleteGroupOffsets(pendingOnly); err != nil || had {
		t.Fatalf("delete of a group with only pending offsets: %v %v", had, err)
	}
	if _, err := offsetsPart(t, e, g).writeMarkerDurable(producer.Marker{ProducerID: pid, Epoch: epoch, Commit: true}); err != nil {
		t.Fatal(err)
	}
	wantOffsets(t, e, g, true, map[TopicPartition]OffsetAndMetadata{t0: {30, "txn"}, t1: {-1, ""}})
	e.kill()
	e = openEngine(t, dir, Options{})
	defer e.Close()
	wantOffsets(t, e, g, true, map[TopicPartition]OffsetAndMetadata{t0: {30, "txn"}, t1: {-1, ""}})
	wantOffsets(t, e, h, true, map[TopicPartition]OffsetAndMetadata{t0: {5, "h"}})
}

// Deletes racing plain commits, transactional commits and their markers in
// one offsets partition: whatever the interleaving, the live state is the
// one a replay of the log rebuilds.
func TestDeleteGroupOffsetsConcurrent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	const group = "g"
	if _, err := e.fetchOffsets(group, nil, false); err != nil { // opens the store
		t.Fatal(err)
	}
	p := offsetsPart(t, e, group)
	var wg sync.WaitGroup
	// The deletes start once one commit is in: on a loaded machine the
	// deleting goroutine could otherwise run all its deletes before any
	// commit, and find nothing to delete.
	firstCommit := make(chan struct{})
	for w := range 3 {
		tp := TopicPartition{"t", int32(w)}
		wg.Go(func() { // plain commits
			for i := range 60 {
				if err := e.Frontend().CommitOffsets(group, map[TopicPartition]OffsetAndMetadata{tp: {int64(i), ""}}); err != nil {
					t.Error(err)
				}
				if w == 0 && i == 0 {
					close(firstCommit)
				}
			}
		})
		pid, epoch, _ := e.initProducerID()
		wg.Go(func() { // transactional commits and their markers
			for i := range 30 {
				if err := e.Frontend().TxnCommitOffsets(group, pid, epoch, map[TopicPartition]OffsetAndMetadata{{"x", int32(w)}: {int64(i), ""}}); err != nil {
					t.Error(err)
				}
				if _, err := p.writeMarkerDurable(producer.Marker{ProducerID: pid, Epoch: epoch, Commit: i%4 != 0}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	deletes := 0
	wg.Go(func() {
		<-firstCommit
		for range 40 {
			had, err := e.deleteGroupOffsets(group)
			if err != nil {
				t.Error(err)
			}
			if had {
				deletes++
			}
		}
	})
	wg.Wait()
	if deletes == 0 {
		t.Fatal("no delete found offsets to delete")
	}
	liveIsReplayed(t, e, dir, group)
}

// liveIsReplayed checks that a replay of the group's offsets partition
// rebuilds the live state, and returns the reopened engine.
func liveIsReplayed(t *testing.T, e *Engine, dir, group string) *Engine {
	t.Helper()
	live := storeOf(e).parts[groupPartition(group)]
	e.kill()
	e = openEngine(t, dir, Options{})
	if _, err := e.fetchOffsets(group, nil, false); err != nil {
		t.Fatal(err)
	}
	replayed := storeOf(e).parts[groupPartition(group)]
	if !reflect.DeepEqual(live.committed, replayed.committed) {
		t.Errorf("committed: live %v, replayed %v", live.committed, replayed.committed)
	}
	if !reflect.DeepEqual(live.pending, replayed.pending) {
		t.Errorf("pending: live %v, replayed %v", live.pending, replayed.pending)
	}
	return e
}

// A COMMIT marker written after a deletion's tombstones, before the
// deletion is applied in memory, installs its offsets: they are later in
// the log than the tombstone.
func TestDeleteGroupOffsetsMarkerAfterTombstone(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	const g = "g"
	tp := TopicPartition{"t", 0}
	pid, epoch, _ := e.initProducerID()
	if err := e.Frontend().TxnCommitOffsets(g, pid, epoch, map[TopicPartition]OffsetAndMetadata{tp: {1, ""}}); err != nil {
		t.Fatal(err)
	}
	p := offsetsPart(t, e, g)
	if _, err := p.writeMarkerDurable(producer.Marker{ProducerID: pid, Epoch: epoch, Commit: true}); err != nil {
		t.Fatal(err)
	}
	if err := e.Frontend().TxnCommitOffsets(g, pid, epoch, map[TopicPartition]OffsetAndMetadata{tp: {2, ""}}); err != nil {
		t.Fatal(err)
	}
	e.opts.private.offsetsTombstonedHook = func(p *Partition) {
		if _, err := p.writeMarkerDurable(producer.Marker{ProducerID: pid, Epoch: epoch, Commit: true}); err != nil {
			t.Error(err)
		}
	}
	if had, err := e.deleteGroupOffsets(g); err != nil || !had {
		t.Fatalf("delete: %v %v", had, err)
	}
	e.opts.private.offsetsTombstonedHook = nil
	wantOffsets(t, e, g, true, map[TopicPartition]OffsetAndMetadata{tp: {2, ""}})
	e = liveIsReplayed(t, e, dir, g)
	defer e.Close()
	wantOffsets(t, e, g, true, map[TopicPartition]OffsetAndMetadata{tp: {2, ""}})
}

// A deletion waits for a transactional commit between its write and its
// registration: otherwise a COMMIT marker written meanwhile, before the
// tombstones, would install offsets after the deletion was applied.
func TestDeleteGroupOffsetsWaitsForTxnRegistration(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	const g = "g"
	tp := TopicPartition{"t", 0}
	if err := e.Frontend().CommitOffsets(g, map[TopicPartition]OffsetAndMetadata{tp: {1, ""}}); err != nil {
		t.Fatal(err)
	}
	deleted := make(chan error, 1)
	e.opts.private.offsetsAppendedHook = func(p *Partition, pid int64, epoch int16) {
		if _, err := p.writeMarkerDurable(producer.Marker{ProducerID: pid, Epoch: epoch, Commit: true}); err != nil {
			t.Error(err)
		}
		go func() {
			_, err := e.deleteGroupOffsets(g)
			deleted <- err
		}()
		select {
		case err := <-deleted: // the deletion did not wait
			deleted <- err
		case <-time.After(200 * time.Millisecond):
		}
	}
	pid, epoch, _ := e.initProducerID()
	if err := e.Frontend().TxnCommitOffsets(g, pid, epoch, map[TopicPartition]OffsetAndMetadata{tp: {2, ""}}); err != nil {
		t.Fatal(err)
	}
	e.opts.private.offsetsAppendedHook = nil
	if err := <-deleted; err != nil {
		t.Fatal(err)
	}
	wantOffsets(t, e, g, true, map[TopicPartition]OffsetAndMetadata{tp: {-1, ""}})
	e = liveIsReplayed(t, e, dir, g)
	defer e.Close()
	wantOffsets(t, e, g, true, map[TopicPartition]OffsetAndMetadata{tp: {-1, ""}})
}
