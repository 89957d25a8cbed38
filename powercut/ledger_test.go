package powercut

import (
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/partition"
)

// rawBatch builds an idempotent batch of producer pid at seq.
func rawBatch(t *testing.T, pid int64, seq int32, value string) []byte {
	t.Helper()
	bld := batch.NewBuilder(batch.CodecNone)
	bld.SetProducer(pid, 0, seq)
	bld.Append(1000, nil, []byte(value), nil)
	b, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), b...)
}

// stored is raw as the log keeps it at base.
func stored(raw []byte, base int64) string {
	b := batch.Batch(append([]byte(nil), raw...))
	b.SetBaseOffset(base)
	return hex.EncodeToString(b)
}

var (
	always   = partition.SyncPolicy{Kind: partition.SyncAlways}
	never    = partition.SyncPolicy{Kind: partition.SyncNever}
	interval = partition.SyncPolicy{Kind: partition.SyncInterval, Interval: 20 * time.Millisecond}
	bytesN   = partition.SyncPolicy{Kind: partition.SyncBytes, Bytes: 100}
)

func feed(l *Ledger, lines ...string) {
	for _, line := range lines {
		l.Feed(line)
	}
}

// report is a checker's report on topic idem partition 0 holding batches.
func report(batches ...string) []string {
	out := []string{"verify ok fine", "reinit tx-a 100 1 5", "part idem 0 0 10 10"}
	for _, b := range batches {
		out = append(out, "batch idem 0 "+b)
	}
	return append(out, "done")
}

func broken(l *Ledger) []string { return Broken(l.Policy, l.Counts) }

func TestLedgerAcceptsAcknowledgedBatchAtItsOffset(t *testing.T) {
	raw := rawBatch(t, 7, 0, "a")
	l := NewLedger(always)
	feed(l, "pid 7 0 idem/1/0", "send 1 idem 0 "+hex.EncodeToString(raw), "ack 1 3 3 0")
	if !l.Check(report(stored(raw, 3))) {
		t.Fatal("check refused")
	}
	if b := broken(l); len(b) != 0 || l.Counts.Lost != 0 {
		t.Fatalf("broken %v, counts %+v, failures %v", b, l.Counts, l.Failures)
	}
}

func TestLedgerCountsLossAsBrokenUnderAlwaysOnly(t *testing.T) {
	raw := rawBatch(t, 7, 0, "a")
	for _, pol := range []partition.SyncPolicy{always, never} {
		l := NewLedger(pol)
		feed(l, "send 1 idem 0 "+hex.EncodeToString(raw), "ack 1 3 3 0")
		l.Check(report())
		if l.Counts.Lost != 1 {
			t.Fatalf("%s: lost %d, want 1", pol, l.Counts.Lost)
		}
		want := pol.Kind == partition.SyncAlways
		if got := slices.Contains(broken(l), "lost 1"); got != want {
			t.Fatalf("%s: broken %v", pol, broken(l))
		}
	}
}

func TestLedgerCountsDuplicateAndMismatch(t *testing.T) {
	raw := rawBatch(t, 7, 0, "a")
	other := rawBatch(t, 7, 0, "b") // same producer and sequence, other bytes
	l := NewLedger(never)
	feed(l, "send 1 idem 0 "+hex.EncodeToString(raw), "ack 1 3 3 0")
	l.Check(report(stored(other, 3), stored(raw, 4)))
	if l.Counts.Duplicated != 1 || l.Counts.Mismatched != 1 {
		t.Fatalf("duplicated %d mismatched %d, want 1 and 1: %v", l.Counts.Duplicated, l.Counts.Mismatched, l.Failures)
	}
	if b := broken(l); !slices.Contains(b, "duplicated 1") || !slices.Contains(b, "mismatched 1") {
		t.Fatalf("broken %v: both are promised under never too", b)
	}
}

func TestLedgerCountsLossAfterCleanClose(t *testing.T) {
	raw := rawBatch(t, 7, 0, "a")
	l := NewLedger(never)
	feed(l, "send 1 idem 0 "+hex.EncodeToString(raw), "ack 1 3 3 0")
	l.Check(report(stored(raw, 3)))
	l.Stage(2)
	l.Check(report())
	if l.Counts.LostAfterClose != 1 || !slices.Contains(broken(l), "lost after a clean close 1") {
		t.Fatalf("lost after close %d, broken %v", l.Counts.LostAfterClose, broken(l))
	}
}

func TestLedgerBoundsIntervalAndBytesLosses(t *testing.T) {
	raw := rawBatch(t, 7, 0, "a")
	// interval: a batch acknowledged long before the kill may not be lost.
	l := NewLedger(interval)
	feed(l, "send 1 idem 0 "+hex.EncodeToString(raw), "ack 1 3 3 0")
	l.sends[1].ackAt = time.Now().Add(-time.Hour)
	l.Killed(time.Now())
	l.Check(report())
	if l.Counts.LostBeyondBound != 1 {
		t.Fatalf("interval: beyond bound %d, want 1", l.Counts.LostBeyondBound)
	}
	// ... one acknowledged just before the kill may.
	l = NewLedger(interval)
	feed(l, "send 1 idem 0 "+hex.EncodeToString(raw), "ack 1 3 3 0")
	l.Killed(time.Now())
	l.Check(report())
	if l.Counts.LostBeyondBound != 0 || l.Counts.Lost != 1 {
		t.Fatalf("interval, recent: beyond bound %d lost %d, want 0 and 1", l.Counts.LostBeyondBound, l.Counts.Lost)
	}
	// bytes: more than N plus slack of one partition lost.
	l = NewLedger(bytesN)
	for i := range 40 {
		big := rawBatch(t, 7, int32(i), strings.Repeat("x", 1000))
		feed(l, fmt.Sprintf("send %d idem 0 %s", i+1, hex.EncodeToString(big)), fmt.Sprintf("ack %d %d %d 0", i+1, i, i))
	}
	l.Check(report())
	if l.Counts.LostBeyondBound != 1 || !slices.Contains(broken(l), "lost beyond the bound 1") {
		t.Fatalf("bytes: beyond bound %d, broken %v", l.Counts.LostBeyondBound, broken(l))
	}
}

func TestLedgerChecksTransactionOutcomes(t *testing.T) {
	// Three transactions on txn/0: committed (offsets 0-1), aborted
	// (2-3), commit in doubt (4-5), each with a marker after it.
	lines := []string{
		"txsend tx-a 1.1 txn 0 0 1 100 1", "txend tx-a 1.1 commit", "txdone tx-a 1.1 commit",
		"txsend tx-a 1.2 txn 0 3 4 100 2", "txend tx-a 1.2 abort", "txdone tx-a 1.2 abort",
		"txsend tx-a 1.3 txn 0 6 7 100 3", "txend tx-a 1.3 commit",
	}
	batchAt := func(base int64, epoch int16) string {
		bld := batch.NewBuilder(batch.CodecNone)
		bld.SetProducer(100, epoch, 0)
		bld.SetTransactional(true)
		bld.Append(1000, nil, []byte("v"), nil)
		bld.Append(1000, nil, []byte("v"), nil)
		b, _ := bld.Build()
		return "batch txn 0 " + stored(b, base)
	}
	check := func(visible string) Counts {
		l := NewLedger(always)
		feed(l, lines...)
		l.Check([]string{"part txn 0 0 9 9", batchAt(0, 1), batchAt(3, 2), batchAt(6, 3), "visible txn 0 " + visible, "done"})
		return l.Counts
	}
	for _, c := range []struct {
		visible string
		bad     int
	}{
		{"0-1,6-7", 0},     // in-doubt commit landed
		{"0-1", 0},         // ... or not
		{"0-1,6-6", 1},     // half of it
		{"none", 1},        // the committed one invisible
		{"0-1,3-4,6-7", 1}, // the aborted one visible
	} {
		if got := check(c.visible).Atomicity; got != c.bad {
			t.Errorf("visible %s: atomicity %d, want %d", c.visible, got, c.bad)
		}
	}
	// A pinned last stable offset hides what is above it: counted as
	// pinned, not as atomicity.
	l := NewLedger(always)
	feed(l, lines...)
	l.Check([]string{"pinned txn 0 2 9", "part txn 0 0 9 2", batchAt(0, 1), batchAt(3, 2), batchAt(6, 3), "visible txn 0 0-1", "done"})
	if l.Counts.Atomicity != 0 || l.Counts.PinnedLSOs != 1 {
		t.Fatalf("pinned: atomicity %d pinned %d, want 0 and 1", l.Counts.Atomicity, l.Counts.PinnedLSOs)
	}
}

func TestLedgerCountsRecoveryFailures(t *testing.T) {
	l := NewLedger(never)
	feed(l, "pid 5 0 idem/1/0", "pid 9 3 tx/tx-a")
	l.Check([]string{"verify error torn batch", "wedged tx-b concurrent transactions", "reinit tx-a 9 2 10",
		"unstable etl-tx-a pending", "pid 5 0 check", "done"})
	want := map[string]int{"verify corrupt": 1, "wedged ids": 1, "unstable offsets": 1, "pids reused": 1}
	for _, b := range broken(l) {
		class := b[:strings.LastIndexByte(b, ' ')]
		if _, ok := want[class]; !ok {
			t.Errorf("unexpected %q", b)
		}
		delete(want, class)
	}
	if len(want) != 0 {
		t.Errorf("not counted: %v (broken %v)", want, broken(l))
	}
	// Under always, re-initialising an id at an epoch it used is fencing lost.
	l = NewLedger(always)
	feed(l, "pid 9 3 tx/tx-a")
	l.Check([]string{"reinit tx-a 9 2 10", "done"})
	if l.Counts.EpochRegressed != 1 {
		t.Fatalf("epoch regressed %d, want 1", l.Counts.EpochRegressed)
	}
	// A checker that opens nothing ends the trial; one that never says
	// done is a failure too.
	l = NewLedger(never)
	if l.Check([]string{"openfail corrupt metadata"}) || l.Counts.OpenFailures != 1 {
		t.Fatalf("open failure not counted: %+v", l.Counts)
	}
	l = NewLedger(never)
	if l.Check([]string{"verify ok"}) || l.Counts.CheckFailures != 1 {
		t.Fatalf("unfinished check not counted: %+v", l.Counts)
	}
}

func TestLedgerCountsRetryAtOtherOffsets(t *testing.T) {
	raw := rawBatch(t, 7, 0, "a")
	h := hex.EncodeToString(raw)
	l := NewLedger(never)
	feed(l, "send 1 idem 0 "+h, "ack 1 3 3 0", "send 2 idem 0 "+h, "ack 2 3 3 1")
	if l.Counts.RetryMoved != 0 {
		t.Fatalf("a retry answered at the original offsets counted: %v", l.Failures)
	}
	feed(l, "send 3 idem 0 "+h, "ack 3 8 8 0")
	if l.Counts.RetryMoved != 1 {
		t.Fatalf("retries moved %d, want 1", l.Counts.RetryMoved)
	}
	if got := l.Retries(); len(got) != 1 || got[0] != "idem 0 "+h {
		t.Fatalf("retries %v", got)
	}
}

func TestLedgerChecksProducerHandleBatches(t *testing.T) {
	raw := rawBatch(t, 7, 0, "a") // as engine.Producer built it: producer 7, epoch 0, one record
	for _, c := range []struct {
		ack  string
		lost int
	}{
		{"psend idem 0 3 3 7 0", 0},
		{"psend idem 0 3 3 8 0", 1}, // another producer's batch there
		{"psend idem 0 3 4 7 0", 1}, // other offsets
		{"psend idem 0 5 5 7 0", 1}, // nothing there
	} {
		l := NewLedger(always)
		feed(l, c.ack)
		l.Check(report(stored(raw, 3)))
		if l.Counts.Lost != c.lost || l.Counts.Acked != 1 {
			t.Errorf("%s: lost %d acked %d, want %d and 1", c.ack, l.Counts.Lost, l.Counts.Acked, c.lost)
		}
	}
}

// A stage that ended with no idempotent batch sent left a retries file
// holding one blank line, which the next workload refused to parse: the
// trial then ran no workload at all.
func TestLedgerWritesNoRetryLineWhenNothingWasSent(t *testing.T) {
	l := NewLedger(partition.SyncPolicy{Kind: partition.SyncAlways})
	path := filepath.Join(t.TempDir(), "retries")
	if err := l.WriteRetries(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 0 {
		t.Fatalf("retries file of a ledger with nothing sent holds %q, want it empty", b)
	}
}
