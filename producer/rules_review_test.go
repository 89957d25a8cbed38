package producer

import (
	"encoding/binary"
	"math"

	"errors"
	"github.com/idemlog/idemlog/batch"
	"testing"

	"github.com/idemlog/idemlog/pidtable"
)

// Kafka's ProducerStateManager.writeSnapshot stores entry.lastTimestamp()
// (which a marker sets to the marker's timestamp); readSnapshot restores it
// as the entry's lastTimestamp. Spec §2.5/§2.6: expiry and load-time expiry
// both use lastTimestamp. A save/restore must give the same lastTimestamp.
func TestReviewSnapshotKeepsMarkerTimestamp(t *testing.T) {
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

// Spec §2.3 rule 5: an unknown PID is accepted with any sequence and any
// epoch >= 0. Kafka's checkProducerEpoch compares against the new entry's
// epoch -1, so a negative epoch below -1 gets INVALID_PRODUCER_EPOCH (47).
func TestReviewUnknownProducerNegativeEpochRejected(t *testing.T) {
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

// Spec §2.3 rule 1 / Kafka UnifiedLog.analyzeAndValidateProducerState: the
// duplicate check (findDuplicateBatch over the 5 cached batches) runs BEFORE
// the sequence check. rules.go skips it when the batch follows the newest
// one, arguing five batches cannot span 2^31 sequences; two big batches do.
func TestReviewRetryAfterWrapIsDuplicate(t *testing.T) {
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
