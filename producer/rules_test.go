package producer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/errcode"
	"github.com/idemlog/idemlog/internal/fsutil"
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
	t.Parallel()
	for _, seq := range []int32{0, 17, math.MaxInt32} {
		for _, epoch := range []int16{0, 5} {
			var l producerLog
			mustAppend(t, &l, mk(t, 1, epoch, seq, 2, false))
		}
	}
}

func TestInOrderGapAndOverlap(t *testing.T) {
	t.Parallel()
	var l producerLog
	mustAppend(t, &l, mk(t, 1, 0, 0, 5, false))                                                       // 0..4
	mustAppend(t, &l, mk(t, 1, 0, 5, 5, false))                                                       // 5..9
	expect(t, &l, mk(t, 1, 0, 11, 1, false), ErrOutOfOrderSequence, errcode.OutOfOrderSequenceNumber) // gap
	expect(t, &l, mk(t, 1, 0, 3, 5, false), ErrOutOfOrderSequence, errcode.OutOfOrderSequenceNumber)  // partial overlap
	expect(t, &l, mk(t, 1, 0, 5, 3, false), ErrOutOfOrderSequence, errcode.OutOfOrderSequenceNumber)  // same start, other end
	mustAppend(t, &l, mk(t, 1, 0, 10, 1, false))
}

func TestExactRetryReturnsOriginal(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
	// Only a marker survives (epoch known, no batch): the next batch at that
	// epoch must start at 0.
	var l producerLog
	l.s.SetEpoch(2)
	expect(t, &l, mk(t, 1, 2, 5, 1, false), ErrOutOfOrderSequence, errcode.OutOfOrderSequenceNumber)
	mustAppend(t, &l, mk(t, 1, 2, 0, 1, false))
}

func TestNonTransactionalDuringTransaction(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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

// Kafka's ProducerStateManager.writeSnapshot stores entry.lastTimestamp()
// (which a marker sets to the marker's timestamp); readSnapshot restores it
// as the entry's lastTimestamp. docs/SEMANTICS.md §2.5/§2.6: expiry and load-time expiry
// both use lastTimestamp. A save/restore must give the same lastTimestamp.
func TestSnapshotKeepsMarkerTimestamp(t *testing.T) {
	t.Parallel()
	var l producerLog
	mustAppend(t, &l, mk(t, 1, 0, 0, 2, true)) // maxTimestamp 1001
	m := Marker{ProducerID: 1, Epoch: 0, CoordinatorEpoch: 0, Commit: true}
	if err := CheckMarker(&l.s, m); err != nil {
		t.Fatal(err)
	}
	ApplyMarker(&l.s, m, 2, 5000) // same epoch: the data batch stays cached
	if l.s.LastTimestamp != 5000 {
		t.Fatalf("LastTimestamp %d after marker", l.s.LastTimestamp)
	}
	e := EntryOf(1, &l.s)
	if e.Timestamp != 5000 {
		t.Errorf("snapshot entry timestamp %d, want lastTimestamp 5000 (Kafka writes entry.lastTimestamp())", e.Timestamp)
	}
	var r pidtable.State
	e.Restore(&r)
	if r.LastTimestamp != l.s.LastTimestamp {
		t.Errorf("restored LastTimestamp %d, before save %d: expiry decisions differ after restart", r.LastTimestamp, l.s.LastTimestamp)
	}
}

// docs/SEMANTICS.md §2.3 rule 5: an unknown PID is accepted with any sequence and any
// epoch >= 0. Kafka's checkProducerEpoch compares against the new entry's
// epoch -1, so a negative epoch below -1 gets INVALID_PRODUCER_EPOCH (47).
func TestUnknownProducerNegativeEpochRejected(t *testing.T) {
	t.Parallel()
	var l producerLog
	b := mk(t, 1, -5, 0, 1, false)
	_, _, err := l.append(t, b)
	if !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("unknown producer, epoch -5: err %v, want ErrInvalidProducerEpoch; state now epoch %d", err, l.s.Epoch())
	}
}

// patched returns a copy of b with its header claiming n records (offset and
// sequence delta n-1) from base sequence seq. Check and Apply read only the
// header; a compressed batch may legitimately hold this many tiny records
// within max.message.bytes (zstd/gzip ratios far above 7:1).
func patched(b batch.Batch, seq int32, n int32) batch.Batch {
	c := batch.Batch(append([]byte(nil), b...))
	binary.BigEndian.PutUint32(c[23:], uint32(n-1)) // lastOffsetDelta
	binary.BigEndian.PutUint32(c[53:], uint32(seq)) // baseSequence
	binary.BigEndian.PutUint32(c[57:], uint32(n))   // recordsCount
	binary.BigEndian.PutUint32(c[17:], c.ComputeCRC())
	return c
}

// docs/SEMANTICS.md §2.3 rule 1 / Kafka UnifiedLog.analyzeAndValidateProducerState: the
// duplicate check (findDuplicateBatch over the 5 cached batches) runs BEFORE
// the sequence check. rules.go skips it when the batch follows the newest
// one, arguing five batches cannot span 2^31 sequences; two big batches do.
func TestRetryAfterWrapIsDuplicate(t *testing.T) {
	t.Parallel()
	var l producerLog
	base := mk(t, 1, 0, 0, 1, false)
	a := patched(base, 0, 1_000_000_001)                           // seq 0 .. 1e9
	b := patched(base, 1_000_000_001, math.MaxInt32-1_000_000_000) // .. MaxInt32
	if b.LastSequence() != math.MaxInt32 {
		t.Fatalf("b last seq %d", b.LastSequence())
	}
	baseA := mustAppend(t, &l, a)
	mustAppend(t, &l, b)
	_, dup, err := l.append(t, a) // the client retries a (still cached)
	if err != nil || dup == nil {
		t.Fatalf("retry of cached batch a: dup %v err %v, want duplicate of offset %d (it was written again at %d)", dup, err, baseA, l.leo-int64(a.RecordsCount()))
	}
}
