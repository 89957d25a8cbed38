package engine

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/idemlog/idemlog/partition"
	"github.com/idemlog/idemlog/producer"
	"github.com/idemlog/idemlog/segment"
)

// After a crash, partition.Open resets the aborted-transaction index of every
// segment it recovers, and the engine's replay of the markers rebuilds it.
// When the producer-state load fails (an unreadable snapshot: loadAtMost
// keeps it and fails on purpose, so that a later open can retry),
// openPartition closes the log with Close: that writes a snapshot of the
// empty producer table at the log end and the clean-shutdown marker. The
// next open is then "clean": no recovery, no replay, the empty snapshot is
// loaded, so the aborted transaction is missing from the index and the open
// transaction is forgotten. read_committed delivers the aborted record and
// the open transaction's record, and the LSO is the high watermark.
func TestFailedProducerLoadLosesAbortIndex(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	if err := e.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	p, _ := e.Partition("t", 0)
	must := func(_ AppendResult, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(p.Append(valueBatch(t, -1, 0, false, 'a')))           // 0: plain
	must(p.Append(valueBatch(t, 1, 0, true, 'X')))             // 1: pid 1, aborted below
	must(p.writeMarkerDurable(producer.Marker{ProducerID: 1})) // 2: ABORT pid 1
	must(p.Append(valueBatch(t, -1, 0, false, 'b')))           // 3: plain
	must(p.Append(valueBatch(t, 2, 0, true, 'Y')))             // 4: pid 2, left open
	must(p.Append(valueBatch(t, -1, 0, false, 'c')))           // 5: plain, above the LSO
	if got := string(readCommittedValues(t, p)); got != "ab" {
		t.Fatalf("before the crash read_committed saw %q, want %q", got, "ab")
	}
	e.kill()

	// A snapshot the open cannot read (an I/O error; a directory stands
	// in for one): the open fails, as loadAtMost means it to.
	pdir := filepath.Join(dir, "t-0")
	bad := filepath.Join(pdir, producer.SnapshotName(0))
	if err := os.Mkdir(bad, 0o755); err != nil {
		t.Fatal(err)
	}
	if e2, err := Open(dir, Options{}); err == nil {
		e2.Close()
		t.Fatal("open with an unreadable snapshot succeeded")
	}
	// The problem goes away; the next open must see the same partition.
	if err := os.Remove(bad); err != nil {
		t.Fatal(err)
	}
	e = openEngine(t, dir, Options{})
	defer e.Close()
	p, _ = e.Partition("t", 0)
	if lso := p.LastStableOffset(); lso != 4 {
		t.Errorf("LSO %d after the failed open, want 4 (pid 2's open transaction)", lso)
	}
	if got := string(readCommittedValues(t, p)); got != "ab" {
		t.Errorf("after the failed open read_committed saw %q, want %q (X aborted, Y open)", got, "ab")
	}
}

// txnIndexFill writes transactions of several producers over several small
// segments (some aborted, some committed, interleaved) and returns the
// read_committed view.
func txnIndexFill(t *testing.T, p *Partition) {
	t.Helper()
	must := func(_ AppendResult, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	seq := map[int64]int32{}
	data := func(pid int64, v byte) {
		t.Helper()
		must(p.Append(valueBatch(t, pid, seq[pid], true, v)))
		seq[pid]++
	}
	for round := range 6 {
		data(1, 'x')
		data(2, byte('A'+round))
		data(1, 'x')
		must(p.Append(valueBatch(t, -1, 0, false, byte('a'+round))))
		must(p.writeMarkerDurable(producer.Marker{ProducerID: 1}))
		data(3, 'y')
		must(p.writeMarkerDurable(producer.Marker{ProducerID: 2, Commit: true}))
		must(p.writeMarkerDurable(producer.Marker{ProducerID: 3}))
	}
}

// partition.Open resets the aborted-transaction index of every segment it
// recovers and then, before returning, makes the recovery durable: it syncs
// the recovered segments and checkpoints the recovery point at the log end.
// The entries come back only with the engine's replay that follows
// (loadProducers). A crash in between (here: partition.Open, then Kill,
// exactly the files such a crash leaves) makes the next open trust every
// segment but the last one and replay only from the newest snapshot at or
// below the last segment's base: the emptied indexes of the segments before
// that snapshot are never rebuilt, and read_committed shows their aborted
// records.
func TestCrashAfterLogRecoveryLosesAbortIndex(t *testing.T) {
	t.Parallel()
	opts := Options{Partition: partition.Options{Segment: segment.Options{MaxBytes: 700, IndexMaxBytes: 1024}}}
	dir := t.TempDir()
	e := openEngine(t, dir, opts)
	if err := e.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	p, _ := e.Partition("t", 0)
	txnIndexFill(t, p)
	want := string(readCommittedValues(t, p))
	leo := p.log.LogEndOffset()
	wantIdx := p.log.AbortedTxns(0, leo, nil)
	e.kill()
	// The recovery point lags (it may: "that costs only a longer scan",
	// says writeCheckpoints; here it is the log's first offset), so the
	// next open recovers every segment. Whatever seals and snapshots the
	// maintainer finished before the kill, the first two segments hold
	// aborted transactions below every snapshot.
	pdir := filepath.Join(dir, "t-0")
	ck := filepath.Join(pdir, "recovery-point-offset-checkpoint")
	b, err := os.ReadFile(ck)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	f := strings.Fields(lines[len(lines)-1])
	f[len(f)-1] = "0"
	lines[len(lines)-1] = strings.Join(f, " ")
	if err := os.WriteFile(ck, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The next process crashes right after the log's recovery, before the
	// engine's replay rebuilt the aborted-transaction indexes.
	l, err := partition.Open(pdir, opts.withDefaults().Partition)
	if err != nil {
		t.Fatal(err)
	}
	l.Kill()

	e = openEngine(t, dir, opts)
	defer e.Close()
	p, _ = e.Partition("t", 0)
	if got := string(readCommittedValues(t, p)); got != want {
		t.Errorf("read_committed saw %q, want %q", got, want)
	}
	if got := p.log.AbortedTxns(0, leo, nil); !reflect.DeepEqual(got, wantIdx) {
		t.Errorf("aborted index has %d entries, want %d", len(got), len(wantIdx))
	}
}
