package partition

import (
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/txnindex"
)

// compactLog is a log written from a script of Kafka's LogCleanerTest
// notation (spec: "kN" a one-record batch of key N, "kN=nil" a tombstone,
// "Pi[a,b]" an idempotent batch of producer i, "Ti[a,b]" a transactional
// one, "C(Pi)" / "A(Pi)" a commit / abort marker, "|" a roll).
type compactLog struct {
	t        *testing.T
	l        *Log
	now      time.Time
	seq      map[int64]int32
	txnStart map[int64]int64 // first offset of each producer's open transaction
}

func newCompactLog(t *testing.T) *compactLog {
	t.Helper()
	c := &compactLog{t: t, now: time.UnixMilli(1_700_000_000_000), seq: map[int64]int32{}, txnStart: map[int64]int64{}}
	l, err := Open(t.TempDir(), Options{NoRecycle: true, Now: func() time.Time { return c.now }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	c.l = l
	return c
}

// run appends the batches of script.
func (c *compactLog) run(script string) {
	c.t.Helper()
	for _, tok := range strings.Fields(script) {
		switch {
		case tok == "|":
			c.roll()
		case strings.HasPrefix(tok, "k"):
			key, val, _ := strings.Cut(tok[1:], "=")
			v := []byte("v" + key)
			if val == "nil" {
				v = nil
			}
			b := batch.NewBuilder(batch.CodecNone)
			b.Append(c.now.UnixMilli(), []byte(key), v, nil)
			c.append(mustBuild(c.t, b))
		case strings.HasPrefix(tok, "P"), strings.HasPrefix(tok, "T"):
			i := strings.IndexByte(tok, '[')
			pid, _ := strconv.ParseInt(tok[1:i], 10, 64)
			keys := strings.Split(strings.Trim(tok[i:], "[]"), ",")
			b := batch.NewBuilder(batch.CodecNone)
			b.SetProducer(pid, 0, c.seq[pid])
			txn := tok[0] == 'T'
			b.SetTransactional(txn)
			for _, k := range keys {
				b.Append(c.now.UnixMilli(), []byte(k), []byte("v"+k), nil)
			}
			c.seq[pid] += int32(len(keys))
			res := c.append(mustBuild(c.t, b))
			if _, open := c.txnStart[pid]; txn && !open {
				c.txnStart[pid] = res.BaseOffset
			}
		case strings.HasPrefix(tok, "C("), strings.HasPrefix(tok, "A("):
			pid, _ := strconv.ParseInt(strings.Trim(tok[2:], "P)"), 10, 64)
			typ := batch.ControlCommit
			if tok[0] == 'A' {
				typ = batch.ControlAbort
			}
			res := c.append(batch.AppendMarker(nil, batch.Marker{Type: typ, ProducerID: pid, Timestamp: c.now.UnixMilli()}))
			first, open := c.txnStart[pid]
			delete(c.txnStart, pid)
			if typ == batch.ControlAbort {
				if !open {
					first = res.BaseOffset
				}
				if err := c.l.IndexAborted(txnindex.Entry{ProducerID: pid, FirstOffset: first, LastOffset: res.BaseOffset, LastStableOffset: res.BaseOffset + 1}); err != nil {
					c.t.Fatal(err)
				}
			}
		default:
			c.t.Fatalf("bad token %q", tok)
		}
	}
}

func mustBuild(t *testing.T, b *batch.Builder) []byte {
	t.Helper()
	v, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), v...)
}

func (c *compactLog) append(raw []byte) AppendResult {
	c.t.Helper()
	res, err := c.l.Append(raw)
	if err != nil {
		c.t.Fatal(err)
	}
	return res
}

func (c *compactLog) roll() {
	c.l.mu.Lock()
	err := c.l.roll(c.l.leo)
	c.l.mu.Unlock()
	if err != nil {
		c.t.Fatal(err)
	}
	c.l.waitIdle()
}

// clean runs one pass with delete.retention.ms one day (Kafka's default)
// unless cfg says otherwise.
func (c *compactLog) clean(cfg CleanConfig) CleanStats {
	c.t.Helper()
	if cfg.DeleteRetention == 0 {
		cfg.DeleteRetention = 24 * time.Hour
	}
	st, err := c.l.Clean(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	return st
}

// state describes the log: the last offsets of its batches (fillers, the
// empty batches without producer that cover dropped offsets, left out),
// and its records as "offset:key" (":key=nil" for a tombstone).
func (c *compactLog) state() (lasts []int64, records []string) {
	c.t.Helper()
	var dec batch.Decoder
	for off := c.l.FirstRetainedOffset(); off < c.l.HighWatermark(); {
		ch, err := c.l.ReadRetained(off, 1<<20)
		if err != nil {
			c.t.Fatal(err)
		}
		bi := batch.NewIter(ch.Data)
		for bi.Next() {
			b := bi.Batch()
			if _, err := batch.Validate(b, 0); err != nil {
				c.t.Fatalf("batch at %d: %v", b.BaseOffset(), err)
			}
			if b.RecordsCount() == 0 && !b.HasProducerID() && !b.IsControl() {
				continue
			}
			lasts = append(lasts, b.LastOffset())
			if b.IsControl() {
				continue
			}
			it, err := dec.Records(b)
			if err != nil {
				c.t.Fatal(err)
			}
			var r batch.Record
			for it.Next(&r) {
				s := fmt.Sprintf("%d:%s", r.Offset, r.Key)
				if r.Value == nil {
					s += "=nil"
				}
				records = append(records, s)
			}
		}
		if err := bi.Err(); err != nil {
			c.t.Fatal(err)
		}
		off = ch.NextOffset
		ch.Release()
	}
	return lasts, records
}

func (c *compactLog) wantLasts(want ...int64) {
	c.t.Helper()
	if got, _ := c.state(); !slices.Equal(got, want) {
		c.t.Fatalf("batch last offsets %v, want %v", got, want)
	}
}

func (c *compactLog) wantRecords(want string) {
	c.t.Helper()
	_, got := c.state()
	if strings.Join(got, " ") != want {
		c.t.Fatalf("records %q, want %q", strings.Join(got, " "), want)
	}
}

func (c *compactLog) wantAborted(want ...int64) {
	c.t.Helper()
	var got []int64
	for _, e := range c.l.AbortedTxns(0, math.MaxInt64, nil) {
		got = append(got, e.ProducerID)
	}
	if !slices.Equal(got, want) {
		c.t.Fatalf("aborted transactions of producers %v, want %v", got, want)
	}
}

func (c *compactLog) later(d time.Duration) { c.now = c.now.Add(d) }

// cleanFrom runs a pass from first dirty offset from, as Kafka's tests
// force one.
func (c *compactLog) cleanFrom(from int64) {
	c.l.cleaner.firstDirty, c.l.cleaner.loaded = from, true
	c.clean(CleanConfig{})
}

// twoPass is Kafka's runTwoPassClean: a pass from the log start now, and
// another once delete.retention.ms has passed.
func (c *compactLog) twoPass() {
	c.cleanFrom(0)
	c.later(24*time.Hour + time.Millisecond)
	c.cleanFrom(0)
}

func (c *compactLog) firstBatch() batch.Batch {
	c.t.Helper()
	ch, err := c.l.ReadRetained(c.l.FirstRetainedOffset(), 1)
	if err != nil {
		c.t.Fatal(err)
	}
	defer ch.Release()
	b, err := batch.Parse(ch.Data)
	if err != nil {
		c.t.Fatal(err)
	}
	return append(batch.Batch(nil), b...)
}

// Scenario 1 (testLogCleanerStats): dedupe from a mid-log dirty offset.
func TestCleanDedupesFromFirstDirty(t *testing.T) {
	c := newCompactLog(t)
	c.run("k0 k1 k0 k1 k0 | k9")
	c.l.cleaner.firstDirty, c.l.cleaner.loaded = 2, true
	st := c.clean(CleanConfig{MaxKeys: 3})
	c.wantRecords("3:1 4:0 5:9")
	if st.EndOffset != 5 || st.RecordsRead != 5 || st.RecordsKept != 2 {
		t.Fatalf("stats %+v, want end 5, 5 read, 2 kept", st)
	}
}

// Scenario 2 (testPartialSegmentClean): a map of one key cleans up to the
// last offset it mapped, and the next pass goes on from there.
func TestCleanPartialWhenMapFull(t *testing.T) {
	c := newCompactLog(t)
	c.run("k0 k1 k0 k1 k0 | k9")
	c.l.cleaner.firstDirty, c.l.cleaner.loaded = 2, true
	if st := c.clean(CleanConfig{MaxKeys: 1}); st.EndOffset != 3 {
		t.Fatalf("end %d, want 3", st.EndOffset)
	}
	c.wantRecords("1:1 2:0 3:1 4:0 5:9")
	if st := c.clean(CleanConfig{MaxKeys: 1}); st.EndOffset != 4 {
		t.Fatalf("end %d, want 4", st.EndOffset)
	}
	c.wantRecords("2:0 3:1 4:0 5:9")
	c.clean(CleanConfig{MaxKeys: 1})
	c.wantRecords("3:1 4:0 5:9")
}

// Scenario 4 (testCleaningWithDeletes) and 5 (testCleanTombstone): a
// tombstone removes older values at once and stays until delete.retention.ms
// after the pass that stamped its horizon; record timestamps play no part.
func TestCleanTombstoneHorizon(t *testing.T) {
	c := newCompactLog(t)
	c.run("k0 k1 k2 | k0=nil k2=nil k3 | k4")
	c.clean(CleanConfig{})
	c.wantRecords("1:1 3:0=nil 4:2=nil 5:3 6:4")
	c.later(24*time.Hour - time.Millisecond) // not past: now < horizon
	c.run("k5 |")
	c.clean(CleanConfig{})
	c.wantRecords("1:1 3:0=nil 4:2=nil 5:3 6:4 7:5")
	c.later(time.Millisecond)
	c.run("k6 |")
	c.clean(CleanConfig{})
	c.wantRecords("1:1 5:3 6:4 7:5 8:6")
}

// Scenario 6 (testCleaningWithUnkeyedMessages): records without a key go.
func TestCleanDropsUnkeyed(t *testing.T) {
	c := newCompactLog(t)
	b := batch.NewBuilder(batch.CodecNone)
	for range 3 {
		b.Reset(batch.CodecNone)
		b.Append(c.now.UnixMilli(), nil, []byte("x"), nil)
		c.append(mustBuild(t, b))
	}
	c.run("k1 k2 | k3")
	st := c.clean(CleanConfig{})
	c.wantRecords("3:1 4:2 5:3")
	if st.Invalid != 3 {
		t.Fatalf("invalid %d, want 3", st.Invalid)
	}
}

// Scenario 7 (testCleaningWithUncleanableSection) with 31 (min lag): a
// segment younger than min.compaction.lag.ms is left byte for byte.
func TestCleanMinLagBoundsRange(t *testing.T) {
	c := newCompactLog(t)
	c.run("k0 k0 |")
	c.later(2 * time.Hour)
	c.run("k0 k0 | k1")
	st := c.clean(CleanConfig{MinLag: time.Hour})
	if st.EndOffset != 2 {
		t.Fatalf("end %d, want 2 (the young segment is uncleanable)", st.EndOffset)
	}
	c.wantRecords("1:0 2:0 3:0 4:1")
	c.later(2 * time.Hour)
	c.clean(CleanConfig{MinLag: time.Hour})
	c.wantRecords("3:0 4:1")
}

// Scenario 8 (testCleaningBeyondMissingOffsets): the pass's end is the
// active segment's base even when it follows a gap.
func TestCleanEndSkipsGap(t *testing.T) {
	c := newCompactLog(t)
	c.run("k0 k1 k2 |")
	c.l.mu.Lock()
	c.l.leo = 11 // offsets 3..10 lost (as a damaged segment leaves them)
	err := c.l.roll(11)
	c.l.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	c.l.waitIdle()
	c.run("k0")
	if st := c.clean(CleanConfig{}); st.EndOffset != 11 {
		t.Fatalf("end %d, want 11", st.EndOffset)
	}
	// k0@11 is in the active segment: not mapped, so k0@0 stays.
	c.wantRecords("0:0 1:1 2:2 11:0")
}

// Scenario 9 (testLogCleanerRetainsProducerLastSequence): the last batch
// of every producer stays, emptied if need be.
func TestCleanKeepsLastBatchOfEachProducer(t *testing.T) {
	c := newCompactLog(t)
	c.run("k0 P1[0] P2[0] P3[0] P2[1] | k9")
	c.clean(CleanConfig{})
	c.wantLasts(1, 3, 4, 5)
	c.wantRecords("3:0 4:1 5:9")
	lasts := producerLasts(*c.l.segs.Load(), c.l.HighWatermark())
	for pid, want := range map[int64]int64{1: 1, 2: 4, 3: 3} {
		if lasts[pid].lastData != want {
			t.Fatalf("producer %d's last batch at %d, want %d", pid, lasts[pid].lastData, want)
		}
	}
}

// Scenario 11 (testBasicTransactionAwareCleaning): aborted data goes
// whatever its keys; markers with data read in the pass stay, and the
// aborted transaction's index entry with them.
func TestCleanTransactionsBasic(t *testing.T) {
	c := newCompactLog(t)
	c.run("T1[1,2] T2[2,3] T1[3,4] A(P1) C(P2) T1[2] C(P1) | k9")
	c.clean(CleanConfig{})
	c.wantRecords("3:3 8:2 10:9")
	c.wantLasts(3, 6, 7, 8, 9, 10)
	c.wantAborted(1)
}

// Scenario 14 (testAbortMarkerRemoval): an abort marker goes once its
// data is gone and its horizon passed.
func TestCleanAbortMarkerRemoval(t *testing.T) {
	c := newCompactLog(t)
	c.run("T1[1] T1[2,3] A(P1) T1[3] C(P1) | k9")
	c.clean(CleanConfig{})
	c.wantLasts(3, 4, 5, 6)
	c.wantRecords("4:3 6:9")
	c.twoPass()
	c.wantLasts(4, 5, 6)
	c.wantAborted()
}

// Scenario 15 (testLogCleanerRetainsLastSequenceEvenIfTransactionAborted):
// a producer's last batch of aborted data stays as an empty header.
func TestCleanAbortedKeepsSequence(t *testing.T) {
	c := newCompactLog(t)
	c.run("T1[1] T1[2,3] A(P1) | k9")
	c.clean(CleanConfig{})
	c.wantLasts(2, 3, 4)
	c.wantRecords("4:9")
	c.wantAborted(1)
}

// Scenario 16 (testAbortMarkerRetentionWithEmptyBatch).
func TestCleanAbortMarkerWithEmptyBatch(t *testing.T) {
	c := newCompactLog(t)
	c.run("T1[2,3] A(P1) |")
	c.run("k9")
	c.clean(CleanConfig{})
	c.wantLasts(1, 2, 3)
	c.wantAborted(1)
	c.twoPass()
	c.wantLasts(1, 2, 3)
	c.wantAborted(1)
	c.run("T1[1] |")
	c.cleanFrom(0)
	c.wantLasts(2, 3, 4)
	c.wantAborted(1)
	c.twoPass()
	c.wantLasts(3, 4)
	c.wantRecords("3:9 4:1")
	c.wantAborted()
}

// Scenario 18 (testCleanEmptyControlBatch): a marker-only producer's marker
// becomes an empty control batch and stays.
func TestCleanMarkerOnlyProducer(t *testing.T) {
	c := newCompactLog(t)
	c.run("C(P1) k2 k3 | k9")
	c.twoPass()
	c.wantLasts(0, 1, 2, 3)
	c.wantRecords("1:2 2:3 3:9")
	if b := c.firstBatch(); !b.IsControl() || b.RecordsCount() != 0 {
		t.Fatalf("first batch control %v with %d records, want an empty control batch", b.IsControl(), b.RecordsCount())
	}
	c.now = time.UnixMilli(math.MaxInt64 / 2)
	c.cleanFrom(0)
	c.wantLasts(0, 1, 2, 3)
}

// Scenario 19 (testCommittedTransactionSpanningSegments).
func TestCleanCommittedSpanningSegments(t *testing.T) {
	c := newCompactLog(t)
	c.run("T1[1] | C(P1) | k9")
	c.twoPass()
	c.wantLasts(0, 1, 2)
	c.wantRecords("0:1 2:9")
}

// Scenario 22 (testDeletedBatchesWithNoMessagesRead).
func TestCleanDroppedBatches(t *testing.T) {
	c := newCompactLog(t)
	c.run("T1[1] A(P1) T1[2] T1[2] C(P1) | k9")
	c.clean(CleanConfig{})
	c.wantLasts(1, 3, 4, 5)
	c.twoPass()
	c.wantLasts(3, 4, 5)
	c.wantRecords("3:2 5:9")
}

// Scenario 23 (KAFKA-14055): user keys equal to a marker's key bytes do
// not remove the marker.
func TestCleanMarkerLikeKeys(t *testing.T) {
	c := newCompactLog(t)
	c.run("T1[1] C(P1)")
	b := batch.NewBuilder(batch.CodecNone)
	b.SetProducer(2, 0, 0)
	b.SetTransactional(true)
	b.Append(c.now.UnixMilli(), []byte{0, 0, 0, 1}, []byte("foo"), nil)
	c.append(mustBuild(t, b))
	c.run("C(P2) | k9")
	c.clean(CleanConfig{})
	c.wantLasts(0, 1, 2, 3, 4)
}

// Scenario 25 (testCleanSegmentsRetainingLastEmptyBatch): every key of the
// cleaned segments superseded: their offsets stay covered up to the next
// segment's base.
func TestCleanSupersededSegmentsKeepOffsets(t *testing.T) {
	c := newCompactLog(t)
	c.run("k0 k1 | k2 k3 | k0 k1 k2 k3 | k9")
	c.l.cleaner.firstDirty, c.l.cleaner.loaded = 4, true
	c.clean(CleanConfig{})
	c.wantRecords("4:0 5:1 6:2 7:3 8:9")
	bases := c.l.SegmentBases()
	if !slices.Equal(bases, []int64{0, 8}) {
		t.Fatalf("segments %v, want [0 8]", bases)
	}
	if s := (*c.l.segs.Load())[0]; s.NextOffset() != 8 {
		t.Fatalf("cleaned segment ends at %d, want 8", s.NextOffset())
	}
}

// Scenario 26 (testSegmentGrouping): groups stay within segment.bytes.
func TestCleanGroupsBySize(t *testing.T) {
	c := newCompactLog(t)
	for i := range 10 {
		c.run(fmt.Sprintf("k%d |", i))
	}
	segs := (*c.l.segs.Load())[:10]
	next := func(i int) int64 { return (*c.l.segs.Load())[i+1].Base() }
	size := segs[0].Published()
	for _, tc := range []struct {
		max  int64
		want int
	}{{1 << 40, 1}, {1, 10}, {3*size + 1, 4}} {
		if got := groupSegments(segs, next, tc.max, 1<<40, 10); len(got) != tc.want {
			t.Fatalf("max %d: %d groups %v, want %d", tc.max, len(got), got, tc.want)
		}
	}
	c.clean(CleanConfig{})
	if n := len(c.l.SegmentBases()); n != 2 {
		t.Fatalf("%d segments after cleaning, want 2", n)
	}
}

// Scenario 32 (testUndecidedTransactionalDataNotCleanable): nothing at or
// above the last stable offset is cleaned.
func TestCleanStopsAtStableEnd(t *testing.T) {
	c := newCompactLog(t)
	c.run("T15[1,2] T15[1] | k9")
	lso := int64(0)
	if st := c.clean(CleanConfig{StableEnd: func() int64 { return lso }}); st.EndOffset != 0 {
		t.Fatalf("end %d, want 0", st.EndOffset)
	}
	c.run("A(P15) | k8")
	lso = 4
	if st := c.clean(CleanConfig{StableEnd: func() int64 { return lso }}); st.EndOffset != 3 {
		t.Fatalf("end %d, want 3 (the segment holding the stable end is not cleaned)", st.EndOffset)
	}
	lso = 5
	if st := c.clean(CleanConfig{StableEnd: func() int64 { return lso }}); st.EndOffset != 5 {
		t.Fatalf("end %d, want 5", st.EndOffset)
	}
}

// Scenario 34: a checkpoint past the log end, or below the log start, is
// reset to the log start; a log of one segment is never cleaned.
func TestCleanCheckpointReset(t *testing.T) {
	c := newCompactLog(t)
	c.run("k0 k0")
	if _, _, due := c.l.Dirtiness(CleanConfig{}); due {
		t.Fatal("a log of one (active) segment is due")
	}
	c.run("| k0")
	c.l.cleaner.firstDirty, c.l.cleaner.loaded = 200, true
	if got := c.l.FirstDirtyOffset(); got != 0 {
		t.Fatalf("first dirty %d, want 0", got)
	}
	if err := c.l.DeleteRecordsBefore(1); err != nil {
		t.Fatal(err)
	}
	c.l.cleaner.firstDirty = 0
	if got := c.l.FirstDirtyOffset(); got != 1 {
		t.Fatalf("first dirty %d, want the log start 1", got)
	}
}

// The dirty ratio: cleanable over clean plus cleanable, due above
// min.cleanable.dirty.ratio or past max.compaction.lag.ms.
func TestCleanDirtiness(t *testing.T) {
	c := newCompactLog(t)
	c.run("k0 k0 k0 k0 | k1")
	ratio, _, due := c.l.Dirtiness(CleanConfig{MinDirtyRatio: 0.5})
	if ratio != 1 || !due {
		t.Fatalf("ratio %v due %v, want 1 and due", ratio, due)
	}
	c.clean(CleanConfig{})
	c.run("k1 |")
	ratio, _, due = c.l.Dirtiness(CleanConfig{MinDirtyRatio: 0.9})
	if ratio >= 0.9 || due {
		t.Fatalf("ratio %v due %v, want below 0.9, not due", ratio, due)
	}
	c.later(2 * time.Hour)
	if _, _, due = c.l.Dirtiness(CleanConfig{MinDirtyRatio: 0.9, MaxLag: time.Hour}); !due {
		t.Fatal("not due past max.compaction.lag.ms")
	}
}

// A compressed batch whose records are partly superseded is rebuilt in
// its codec with the kept records at their offsets.
func TestCleanRebuildsCompressedBatch(t *testing.T) {
	c := newCompactLog(t)
	b := batch.NewBuilder(batch.CodecGzip)
	for _, k := range []string{"a", "b", "c"} {
		b.Append(c.now.UnixMilli(), []byte(k), []byte("v"), nil)
	}
	c.append(mustBuild(t, b))
	c.run("kb | k9")
	c.clean(CleanConfig{})
	c.wantRecords("0:a 2:c 3:b 4:9")
	ch, err := c.l.ReadRetained(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Release()
	if first := batch.Batch(ch.Data); first.Codec() != batch.CodecGzip || first.LastOffset() != 2 {
		t.Fatalf("first batch codec %v last %d, want gzip ending at 2", first.Codec(), first.LastOffset())
	}
}

// A cleaned log reopens to the same contents, after a clean close and
// after a crash (the recovery scan reads fillers and empty batches as
// contiguous data).
func TestCleanReopens(t *testing.T) {
	for _, crash := range []bool{false, true} {
		t.Run(fmt.Sprint("crash=", crash), func(t *testing.T) {
			c := newCompactLog(t)
			c.run("k0 k1 k0 P1[1] k2 k0 | k1 k3 | k9")
			c.clean(CleanConfig{})
			_, want := c.state()
			dir := c.l.Dir()
			if crash {
				c.l.Kill()
				c.l.mu.Lock()
				c.l.releaseSegmentsLocked()
				c.l.mu.Unlock()
				// Everything was synced by seals: make the recovery scan
				// every segment.
				if err := writeCheckpoint(dir+"/"+recoveryPointFile, dir, 0); err != nil {
					t.Fatal(err)
				}
			} else if err := c.l.Close(); err != nil {
				t.Fatal(err)
			}
			l, err := Open(dir, Options{NoRecycle: true, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			c.l = l
			_, got := c.state()
			if !slices.Equal(got, want) {
				t.Fatalf("after reopen %v, want %v", got, want)
			}
		})
	}
}
