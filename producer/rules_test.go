package producer

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/idemlog/idemlog/internal/fsutil"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/errcode"
	"github.com/idemlog/idemlog/pidtable"
)

// mk builds a data batch of n records for producer pid.
func mk(t *testing.T, pid int64, epoch int16, seq int32, n int, txn bool) batch.Batch {
	t.Helper()
	b := batch.NewBuilder(batch.CodecNone)
	b.SetProducer(pid, epoch, seq)
	b.SetTransactional(txn)
	for i := range n {
		b.Append(int64(1000+i), nil, []byte{byte(i)}, nil)
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return batch.Batch(bytes.Clone(out))
}

// producerLog is a state plus a log end: append checks and applies.
type producerLog struct {
	s   pidtable.State
	leo int64
}

func (l *producerLog) append(t *testing.T, b batch.Batch) (base int64, dup *Duplicate, err error) {
	t.Helper()
	d, isDup, err := Check(&l.s, b)
	if err != nil || isDup {
		if isDup {
			dup = &d
		}
		return -1, dup, err
	}
	base = l.leo
	Apply(&l.s, b, base)
	l.leo += int64(b.RecordsCount())
	return base, nil, nil
}

func mustAppend(t *testing.T, l *producerLog, b batch.Batch) int64 {
	t.Helper()
	base, dup, err := l.append(t, b)
	if err != nil || dup != nil {
		t.Fatalf("append seq %d epoch %d: dup %v err %v", b.BaseSequence(), b.ProducerEpoch(), dup, err)
	}
	return base
}

func expect(t *testing.T, l *producerLog, b batch.Batch, want error, code int16) {
	t.Helper()
	leo, before := l.leo, l.s
	_, dup, err := l.append(t, b)
	if !errors.Is(err, want) || dup != nil {
		t.Fatalf("seq %d epoch %d: got dup %v err %v, want %v", b.BaseSequence(), b.ProducerEpoch(), dup, err, want)
	}
	if errcode.Code(err) != code {
		t.Fatalf("code %d, want %d", errcode.Code(err), code)
	}
	if l.leo != leo || l.s != before {
		t.Fatal("a rejected batch changed the state")
	}
}

func TestUnknownProducerAcceptsAnySequence(t *testing.T) {
	for _, seq := range []int32{0, 17, math.MaxInt32} {
		for _, epoch := range []int16{0, 5} {
			var l producerLog
			mustAppend(t, &l, mk(t, 1, epoch, seq, 2, false))
		}
	}
}

func TestInOrderGapAndOverlap(t *testing.T) {
	var l producerLog
	mustAppend(t, &l, mk(t, 1, 0, 0, 5, false))                                                       // 0..4
	mustAppend(t, &l, mk(t, 1, 0, 5, 5, false))                                                       // 5..9
	expect(t, &l, mk(t, 1, 0, 11, 1, false), ErrOutOfOrderSequence, errcode.OutOfOrderSequenceNumber) // gap
	expect(t, &l, mk(t, 1, 0, 3, 5, false), ErrOutOfOrderSequence, errcode.OutOfOrderSequenceNumber)  // partial overlap
	expect(t, &l, mk(t, 1, 0, 5, 3, false), ErrOutOfOrderSequence, errcode.OutOfOrderSequenceNumber)  // same start, other end
	mustAppend(t, &l, mk(t, 1, 0, 10, 1, false))
}

func TestExactRetryReturnsOriginal(t *testing.T) {
	var l producerLog
	l.leo = 100
	var sent []batch.Batch
	var bases []int64
	for i := range 7 {
		b := mk(t, 1, 0, int32(i*3), 3, false)
		sent = append(sent, b)
		bases = append(bases, mustAppend(t, &l, b))
	}
	// The last five are recognised with their original offsets and timestamp.
	for i := 2; i < 7; i++ {
		leo := l.leo
		_, dup, err := l.append(t, sent[i])
		if err != nil || dup == nil {
			t.Fatalf("retry of batch %d: dup %v err %v", i, dup, err)
		}
		if dup.BaseOffset != bases[i] || dup.LastOffset != bases[i]+2 || dup.Timestamp != sent[i].MaxTimestamp() {
			t.Fatalf("retry of batch %d: %+v, want base %d", i, *dup, bases[i])
		}
		if l.leo != leo {
			t.Fatal("a duplicate was written")
		}
	}
	// Older than the cache: out of order, never DUPLICATE_SEQUENCE_NUMBER.
	expect(t, &l, sent[1], ErrOutOfOrderSequence, errcode.OutOfOrderSequenceNumber)
	expect(t, &l, sent[0], ErrOutOfOrderSequence, errcode.OutOfOrderSequenceNumber)
}

func TestEpochRules(t *testing.T) {
	var l producerLog
	mustAppend(t, &l, mk(t, 1, 3, 0, 2, false))
	expect(t, &l, mk(t, 1, 2, 2, 1, false), ErrInvalidProducerEpoch, errcode.InvalidProducerEpoch)   // zombie
	expect(t, &l, mk(t, 1, 4, 2, 1, false), ErrOutOfOrderSequence, errcode.OutOfOrderSequenceNumber) // new epoch must start at 0
	old := mk(t, 1, 3, 0, 2, false)
	mustAppend(t, &l, mk(t, 1, 4, 0, 1, false)) // bump: cache restarts
	if l.s.Len() != 1 {
		t.Fatalf("cache holds %d batches after an epoch bump, want 1", l.s.Len())
	}
	// The old epoch's batch is now fenced, even as a retry.
	expect(t, &l, old, ErrInvalidProducerEpoch, errcode.InvalidProducerEpoch)
	// A retry at the new epoch of a batch cached under the old one is not a
	// duplicate: the cache holds only the current epoch.
	expect(t, &l, mk(t, 1, 4, 0, 2, false), ErrOutOfOrderSequence, errcode.OutOfOrderSequenceNumber)
}

func TestSequenceWrap(t *testing.T) {
	var l producerLog
	mustAppend(t, &l, mk(t, 1, 0, math.MaxInt32-1, 4, false)) // MaxInt32-1 .. 1, wrapping
	if got := l.s.Newest().LastSeq; got != 1 {
		t.Fatalf("last sequence %d, want 1", got)
	}
	mustAppend(t, &l, mk(t, 1, 0, 2, 1, false))
	var w producerLog
	mustAppend(t, &w, mk(t, 1, 0, math.MaxInt32, 1, false))
	expect(t, &w, mk(t, 1, 0, math.MaxInt32+0, 2, false), ErrOutOfOrderSequence, errcode.OutOfOrderSequenceNumber)
	mustAppend(t, &w, mk(t, 1, 0, 0, 1, false)) // 0 follows MaxInt32
	// A retry of the wrapping batch is still recognised.
	if _, dup, err := l.append(t, mk(t, 1, 0, math.MaxInt32-1, 4, false)); err != nil || dup == nil {
		t.Fatalf("retry of a wrapping batch: %v %v", dup, err)
	}
}

func TestKnownProducerWithEmptyCache(t *testing.T) {
	// Only a marker survives (epoch known, no batch): the next batch at that
	// epoch must start at 0.
	var l producerLog
	l.s.SetEpoch(2)
	expect(t, &l, mk(t, 1, 2, 5, 1, false), ErrOutOfOrderSequence, errcode.OutOfOrderSequenceNumber)
	mustAppend(t, &l, mk(t, 1, 2, 0, 1, false))
}

func TestNonTransactionalDuringTransaction(t *testing.T) {
	var l producerLog
	base := mustAppend(t, &l, mk(t, 1, 0, 0, 2, true))
	if l.s.TxnFirstOffset() != base {
		t.Fatalf("open transaction at %d, want %d", l.s.TxnFirstOffset(), base)
	}
	expect(t, &l, mk(t, 1, 0, 2, 1, false), ErrInvalidTxnState, errcode.InvalidTxnState)
	mustAppend(t, &l, mk(t, 1, 0, 2, 1, true))
	if l.s.TxnFirstOffset() != base {
		t.Fatal("a second transactional batch moved the transaction start")
	}
}

func TestApplyNeverRejects(t *testing.T) {
	// Replay (recovery) takes whatever the log holds: gaps, older epochs.
	var s pidtable.State
	Apply(&s, mk(t, 1, 5, 10, 2, false), 0)
	Apply(&s, mk(t, 1, 5, 40, 1, false), 2)
	Apply(&s, mk(t, 1, 3, 0, 1, false), 3)
	if s.Epoch() != 3 || s.Len() != 1 || s.Newest().LastSeq != 0 {
		t.Fatalf("replayed state: epoch %d len %d", s.Epoch(), s.Len())
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	var w SnapshotWriter
	w.Reset()
	var a, b pidtable.State
	Apply(&a, mk(t, 7, 2, 40, 3, true), 500)
	a.SetCoordinatorEpoch(9)
	b.SetEpoch(1) // marker only: no cached batch
	w.Add(EntryOf(7, &a))
	w.Add(EntryOf(8, &b))
	img := bytes.Clone(w.Bytes())
	if len(img) != 10+2*46 {
		t.Fatalf("image %d bytes", len(img))
	}
	entries, err := ParseSnapshot(img)
	if err != nil || len(entries) != 2 {
		t.Fatalf("parse: %v %v", entries, err)
	}
	want := SnapshotEntry{ProducerID: 7, Epoch: 2, LastSequence: 42, LastOffset: 502, OffsetDelta: 2, Timestamp: 1002, CoordinatorEpoch: 9, TxnFirstOffset: 500}
	if entries[0] != want {
		t.Fatalf("entry %+v, want %+v", entries[0], want)
	}
	if entries[1].LastOffset != -1 || entries[1].TxnFirstOffset != -1 || entries[1].Epoch != 1 {
		t.Fatalf("marker-only entry %+v", entries[1])
	}
	var r pidtable.State
	entries[0].Restore(&r)
	// After restore, a retry of the newest batch is still a duplicate.
	if dup, isDup, err := Check(&r, mk(t, 7, 2, 40, 3, true)); err != nil || !isDup || dup.BaseOffset != 500 {
		t.Fatalf("retry after restore: %v %v", dup, err)
	}
	// Empty snapshot: 10 bytes.
	w.Reset()
	if n := len(w.Bytes()); n != 10 {
		t.Fatalf("empty snapshot %d bytes", n)
	}
	for name, bad := range map[string][]byte{
		"truncated": img[:len(img)-1],
		"crc":       append(bytes.Clone(img[:len(img)-1]), img[len(img)-1]^1),
		"version":   append([]byte{0, 2}, img[2:]...),
		"short":     img[:5],
	} {
		if _, err := ParseSnapshot(bad); !errors.Is(err, ErrSnapshotCorrupt) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestLoadNewest(t *testing.T) {
	dir := t.TempDir()
	var w SnapshotWriter
	write := func(off int64, pid int64) {
		w.Reset()
		var s pidtable.State
		s.SetEpoch(int16(pid))
		w.Add(EntryOf(pid, &s))
		if err := fsutil.WriteFileAtomic(filepath.Join(dir, SnapshotName(off)), w.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	write(10, 1)
	write(20, 2)
	write(30, 3)
	os.WriteFile(filepath.Join(dir, SnapshotName(20)), []byte("garbage"), 0o644)
	entries, off, err := LoadNewest(dir, 25)
	if err != nil || off != 10 || len(entries) != 1 || entries[0].ProducerID != 1 {
		t.Fatalf("LoadNewest(25) = %v, %d, %v; want the snapshot at 10", entries, off, err)
	}
	if left, _ := ListSnapshots(dir); len(left) != 1 || left[0] != 10 {
		t.Fatalf("snapshots left %v: the corrupt one and the one beyond the log should be gone", left)
	}
}
