package partition

import (
	"errors"
	"testing"
	"time"
)

// TestReview11RetentionDeletesSegmentsBelowLogStart: DeleteRecordsBefore
// moves the log start to the end of the active segment; the next append
// rolls, which leaves the old segment wholly below the log start. Kafka's
// deleteOldSegments always runs deleteLogStartOffsetBreachedSegments
// (whatever retention.ms / retention.bytes say), so the next retention
// deletes it. Here it stays until the next Open.
func TestReview11RetentionDeletesSegmentsBelowLogStart(t *testing.T) {
	opts := smallSegments(1024)
	opts.RetentionAge = -1 // retention.ms = -1, retention.bytes off
	l, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := range 3 {
		if _, err := l.Append(makeBatch(t, i, 1, 200, int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(*l.segs.Load()); n != 1 {
		t.Fatalf("%d segments before the roll, want 1", n)
	}
	if err := l.DeleteRecordsBefore(3); err != nil {
		t.Fatal(err)
	}
	// Does not fit the first segment: rolls to base 3.
	if _, err := l.Append(makeBatch(t, 3, 1, 600, 3)); err != nil {
		t.Fatal(err)
	}
	segs := *l.segs.Load()
	if len(segs) != 2 || segs[1].Base() != 3 {
		t.Fatalf("no roll to base 3: %d segments", len(segs))
	}
	deleted, err := l.ApplyRetention()
	if err != nil {
		t.Fatal(err)
	}
	if deleted != 1 || l.FirstRetainedOffset() != 3 {
		t.Fatalf("ApplyRetention deleted %d segments, first retained offset %d; want 1 and 3 (segment 0 lies wholly below the log start %d)",
			deleted, l.FirstRetainedOffset(), l.LogStartOffset())
	}
}

// TestReview11RetentionExpiredActiveSegment: all the data is in the active
// segment and it is older than retention.ms. Kafka's deletableSegments
// takes the active segment too when the high watermark reaches the log end
// (rolling first), so the log start moves to the log end and the expired
// records go. Here they stay for as long as nothing is appended (and
// segment.ms, by batch timestamps, never rolls an idle segment).
func TestReview11RetentionExpiredActiveSegment(t *testing.T) {
	now := time.UnixMilli(1_000_000_000)
	opts := smallSegments(1 << 20)
	opts.Now = func() time.Time { return now }
	opts.RetentionAge = time.Hour
	l, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := range 5 {
		if _, err := l.Append(makeBatch(t, i, 1, 100, now.UnixMilli())); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(2 * time.Hour)
	deleted, err := l.ApplyRetention()
	if err != nil {
		t.Fatal(err)
	}
	if deleted != 1 || l.LogStartOffset() != 5 {
		t.Fatalf("ApplyRetention two hours past retention.ms=1h: deleted %d, log start %d; want 1 and 5 (Kafka rolls the expired active segment and deletes it)",
			deleted, l.LogStartOffset())
	}
	if _, err := l.Read(0, 1000); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("Read(0) after retention: %v; want ErrOffsetOutOfRange", err)
	}
}

// TestReview11RetentionNoTimestampSegments: batches without timestamps
// (NO_TIMESTAMP, -1, legal in a v2 batch). Kafka's
// LogSegment.largestTimestamp falls back to the file's last-modified time
// when maxTimestampSoFar < 0, so closed segments of such batches still
// expire by retention.ms. Here a segment whose max timestamp is -1 never
// expires by age.
func TestReview11RetentionNoTimestampSegments(t *testing.T) {
	now := time.Now().Add(48 * time.Hour) // the files were written "two days ago"
	opts := smallSegments(1024)
	opts.Now = func() time.Time { return now }
	opts.RetentionAge = time.Hour
	l, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := range 12 {
		if _, err := l.Append(makeBatch(t, i, 1, 200, -1)); err != nil {
			t.Fatal(err)
		}
	}
	nsegs := len(*l.segs.Load())
	if nsegs < 3 {
		t.Fatalf("only %d segments", nsegs)
	}
	deleted, err := l.ApplyRetention()
	if err != nil {
		t.Fatal(err)
	}
	if deleted < nsegs-1 {
		t.Fatalf("ApplyRetention deleted %d of %d segments last modified 48h before now (retention.ms=1h); want at least %d",
			deleted, nsegs, nsegs-1)
	}
}

// TestReview11RollAgeNoTimestamp: Kafka's LogSegment.timeWaitedForRoll
// uses now - the segment's creation time when its first batch has no
// timestamp (maxTimestamp -1). Here a segment whose first batch has no
// timestamp never rolls by segment.ms.
func TestReview11RollAgeNoTimestamp(t *testing.T) {
	now := time.UnixMilli(1_000_000_000)
	opts := smallSegments(1 << 20)
	opts.Now = func() time.Time { return now }
	opts.RollAge = time.Hour
	opts.RetentionAge = -1
	l, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Append(makeBatch(t, 0, 1, 100, -1)); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Hour)
	if _, err := l.Append(makeBatch(t, 1, 1, 100, -1)); err != nil {
		t.Fatal(err)
	}
	if n := len(*l.segs.Load()); n != 2 {
		t.Fatalf("%d segments after an append two hours past segment.ms=1h into a segment created then; want 2 (rolled)", n)
	}
}
