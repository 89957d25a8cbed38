package engine

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemlog/idemlog/partition"
)

// powerLossOptions is an engine under the sync policy named, with no
// background maintenance (the tests decide when transactions end).
func powerLossOptions(t *testing.T, policy string) Options {
	t.Helper()
	sp, err := partition.ParseSyncPolicy(policy)
	if err != nil {
		t.Fatal(err)
	}
	return Options{MaintainInterval: -1, Partition: partition.Options{Sync: sp}}
}

// stableEverywhere fails unless every partition's last stable offset is
// its high watermark.
func stableEverywhere(t *testing.T, e *Engine) {
	t.Helper()
	for _, p := range e.Partitions() {
		if lso, hw := p.LastStableOffset(), p.log.HighWatermark(); lso != hw {
			t.Errorf("%s-%d: last stable offset %d pinned below the high watermark %d", p.topic, p.index, lso, hw)
		}
	}
}

// reinitAndCommit initialises id again (as a restarted application does),
// commits v to p in one transaction and checks that p's committed values
// are then want.
func reinitAndCommit(t *testing.T, e *Engine, id string, p *Partition, v byte, want string) {
	t.Helper()
	tp, err := e.NewTransactionalProducer(id, time.Minute)
	if err != nil {
		t.Fatalf("cannot initialise %q again after the power cut: %v", id, err)
	}
	if err := txnSend(t, tp, p, v); err != nil {
		t.Fatalf("send after re-initialisation: %v", err)
	}
	if err := tp.Commit(); err != nil {
		t.Fatalf("commit after re-initialisation: %v", err)
	}
	stableEverywhere(t, e)
	if got := string(readCommittedValues(t, p)); got != want {
		t.Fatalf("committed values %q, want %q", got, want)
	}
}

// TestPowerCutAfterCommitV2KeepsIDUsable: a commit's completion record and
// the next transaction's Ongoing record are appended to the state log
// without a sync, while the next transaction's batch (at the epoch the
// commit's markers bumped to) is synced and acknowledged. A power cut
// leaves the state log at the commit's decision. Recovery rewrote the
// decided marker, which the partition refused (the epoch is not bumped
// over the open transaction), so the transaction stayed decided; the
// orphan sweep then left the next transaction open because the decision
// listed its partition: InitProducerID answered CONCURRENT_TRANSACTIONS
// for ever and the last stable offset stayed pinned.
func TestPowerCutAfterCommitV2KeepsIDUsable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := powerLossOptions(t, "always")
	e := openEngine(t, dir, opts)
	if err := e.CreateTopic("out", 1); err != nil {
		t.Fatal(err)
	}
	p, _ := e.Partition("out", 0)
	tp, err := e.NewTransactionalProducer("wedge", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := txnSend(t, tp, p, 'a'); err != nil {
		t.Fatal(err)
	}
	if err := tp.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := txnSend(t, tp, p, 'b'); err != nil { // acknowledged: synced
		t.Fatal(err)
	}
	c, _ := e.coordinator()
	if st := c.log.log; st.RecoveryPoint() >= st.HighWatermark() {
		t.Fatal("setup: the state log has no unsynced tail to lose")
	}
	cutPower(t, e)

	e = openEngine(t, dir, opts)
	defer e.Close()
	p, _ = e.Partition("out", 0)
	stableEverywhere(t, e)
	if got := string(readCommittedValues(t, p)); got != "a" {
		t.Fatalf("committed values after the cut %q, want %q", got, "a")
	}
	reinitAndCommit(t, e, "wedge", p, 'c', "ac")
}

// TestPowerCutAfterCommitV1DoesNotCommitNext: with transaction version 1
// a commit's markers keep the epoch, so the next transaction's batches
// carry the epoch of the markers before them. Had a power cut left the
// state log at the commit's decision while the partition kept the next
// transaction's batch, recovery's rewrite of the decided COMMIT marker
// would have committed that batch, which no one committed. Under
// SyncAlways the next transaction's first AddPartitions is made durable
// before its batches can be written, so the cut keeps it Ongoing and the
// re-initialisation aborts it.
func TestPowerCutAfterCommitV1DoesNotCommitNext(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := powerLossOptions(t, "always")
	e := openEngine(t, dir, opts)
	if err := e.CreateTopic("out", 1); err != nil {
		t.Fatal(err)
	}
	p, _ := e.Partition("out", 0)
	c, err := e.coordinator()
	if err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := c.InitProducerID("classic", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ref := []TopicPartition{{"out", 0}}
	if err := c.AddPartitions("classic", pid, epoch, ref, false); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Append(valueBatch(t, pid, 0, true, 'a')); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.EndTxn("classic", pid, epoch, true); err != nil {
		t.Fatal(err)
	}
	if err := c.AddPartitions("classic", pid, epoch, ref, false); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Append(valueBatch(t, pid, 1, true, 'b')); err != nil {
		t.Fatal(err)
	}
	cutPower(t, e)

	e = openEngine(t, dir, opts)
	defer e.Close()
	p, _ = e.Partition("out", 0)
	if got := string(readCommittedValues(t, p)); got != "a" {
		t.Fatalf("committed values after the cut %q, want %q", got, "a")
	}
	reinitAndCommit(t, e, "classic", p, 'c', "ac")
}

// TestPowerCutStateLogBehindPartitions: under "never" the state log and the
// partitions are synced at unrelated moments (rolls, the OS), so a cut can
// leave the state log at a transaction's decision while a partition kept
// that transaction's markers and a later transaction's, at higher epochs.
// Recovery's rewrite of the decided marker was refused ("epoch below") and
// the id answered CONCURRENT_TRANSACTIONS for ever. Left at the
// InitProducerID's record instead, the id was initialised again at an
// epoch below the partition's, and the new instance's batches were refused
// as fenced. Atomicity is not promised there, but every id must be usable
// again.
func TestPowerCutStateLogBehindPartitions(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{"never", "interval=1h"} {
		for _, syncedAtDecision := range []bool{true, false} {
			name := policy + "/state-synced-at-init"
			if syncedAtDecision {
				name = policy + "/state-synced-at-decision"
			}
			t.Run(name, func(t *testing.T) { powerCutStateLogBehind(t, policy, syncedAtDecision) })
		}
	}
}

func powerCutStateLogBehind(t *testing.T, policy string, syncedAtDecision bool) {
	dir := t.TempDir()
	opts := powerLossOptions(t, policy)
	e := openEngine(t, dir, opts)
	if err := e.CreateTopic("out", 1); err != nil {
		t.Fatal(err)
	}
	p, _ := e.Partition("out", 0)
	tp, err := e.NewTransactionalProducer("behind", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := e.coordinator()
	// The state log is synced right after the first decision, as an
	// interval flush may, or never after the InitProducerID's record.
	if syncedAtDecision {
		e.opts.private.decidingHook = func(string) {
			if err := c.log.log.Flush(); err != nil {
				t.Error(err)
			}
		}
	}
	if err := txnSend(t, tp, p, 'a'); err != nil {
		t.Fatal(err)
	}
	err = tp.Commit()
	e.opts.private.decidingHook = nil
	if err != nil {
		t.Fatal(err)
	}
	if err := txnSend(t, tp, p, 'b'); err != nil {
		t.Fatal(err)
	}
	if err := tp.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := p.log.Flush(); err != nil { // a roll's or the OS's sync
		t.Fatal(err)
	}
	cutPower(t, e)

	e = openEngine(t, dir, opts)
	defer e.Close()
	p, _ = e.Partition("out", 0)
	stableEverywhere(t, e)
	reinitAndCommit(t, e, "behind", p, 'c', "abc")
}

// TestPowerCutLosesAddedPartition: a version-2 transaction's second
// partition joins with an Ongoing record that is not synced; a power cut
// keeps the first record and the batches of both partitions. The sweep
// used to abort the unlisted partition alone and leave the listed one
// open, so that the producer's commit after the restart committed one
// partition and not the other. Recovery now aborts the whole transaction
// with a fence: the commit is refused and nothing of it is visible.
func TestPowerCutLosesAddedPartition(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := powerLossOptions(t, "never")
	e := openEngine(t, dir, opts)
	if err := e.CreateTopic("out", 2); err != nil {
		t.Fatal(err)
	}
	p0, _ := e.Partition("out", 0)
	p1, _ := e.Partition("out", 1)
	tp, err := e.NewTransactionalProducer("split", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := e.coordinator()
	if err := txnSend(t, tp, p0, 'a'); err != nil {
		t.Fatal(err)
	}
	if err := c.log.log.Flush(); err != nil { // Ongoing [out-0] survives
		t.Fatal(err)
	}
	if err := txnSend(t, tp, p1, 'b'); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*Partition{p0, p1} {
		if err := p.log.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	pid, epoch := tp.ID()
	cutPower(t, e)

	e = openEngine(t, dir, opts)
	defer e.Close()
	c, err = e.coordinator()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.endTxn("split", pid, epoch, true, true); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("commit of a transaction whose partition list was cut: %v, want %v", err, ErrProducerFenced)
	}
	stableEverywhere(t, e)
	for i := range 2 {
		p, _ := e.Partition("out", i)
		if got := string(readCommittedValues(t, p)); got != "" {
			t.Fatalf("out-%d: %q of a transaction that was never committed is visible", i, got)
		}
	}
	p0, _ = e.Partition("out", 0)
	reinitAndCommit(t, e, "split", p0, 'c', "c")
}

// TestPowerCutStateLogAtOngoing: under "never" a cut can leave the state
// log at a transaction's Ongoing record while the partitions kept its
// commit, a later commit, and a third transaction still open. Open in a
// partition the stale record lists, the orphan sweep took it for the
// recorded transaction and left it open, pinning that partition's last
// stable offset until the id was fenced or timed out, though its producer
// died in the cut. Recovery fences an Ongoing record the partitions have
// moved past (they know the id at a higher epoch). Open in a partition the
// record does not list, the transaction is fenced as in
// TestPowerCutLosesAddedPartition.
func TestPowerCutStateLogAtOngoing(t *testing.T) {
	t.Parallel()
	for _, openIn := range []int{1, 0} {
		t.Run(fmt.Sprintf("open-in-out-%d", openIn), func(t *testing.T) {
			dir := t.TempDir()
			opts := powerLossOptions(t, "never")
			e := openEngine(t, dir, opts)
			if err := e.CreateTopic("out", 2); err != nil {
				t.Fatal(err)
			}
			p0, _ := e.Partition("out", 0)
			p1, _ := e.Partition("out", 1)
			tp, err := e.NewTransactionalProducer("stale", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			c, _ := e.coordinator()
			if err := txnSend(t, tp, p0, 'a'); err != nil {
				t.Fatal(err)
			}
			if err := c.log.log.Flush(); err != nil { // Ongoing [out-0] survives
				t.Fatal(err)
			}
			if err := tp.Commit(); err != nil {
				t.Fatal(err)
			}
			if err := txnSend(t, tp, p0, 'b'); err != nil {
				t.Fatal(err)
			}
			if err := tp.Commit(); err != nil {
				t.Fatal(err)
			}
			open, _ := e.Partition("out", openIn)
			if err := txnSend(t, tp, open, 'c'); err != nil {
				t.Fatal(err)
			}
			for _, p := range []*Partition{p0, p1} {
				if err := p.log.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			cutPower(t, e)

			e = openEngine(t, dir, opts)
			defer e.Close()
			stableEverywhere(t, e)
			p0, _ = e.Partition("out", 0)
			p1, _ = e.Partition("out", 1)
			if got := string(readCommittedValues(t, p0)) + string(readCommittedValues(t, p1)); got != "ab" {
				t.Fatalf("committed values %q, want %q", got, "ab")
			}
			reinitAndCommit(t, e, "stale", p1, 'd', "d")
		})
	}
}
