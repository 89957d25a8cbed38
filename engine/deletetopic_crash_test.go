package engine

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/idemlog/idemlog/internal/testutil"
)

const (
	deleteCrashDirEnv    = "IDEMLOG_DELETE_CRASH_DIR"
	deleteCrashStepEnv   = "IDEMLOG_DELETE_CRASH_STEP"
	deleteCrashPolicyEnv = "IDEMLOG_DELETE_CRASH_POLICY"
)

// deleteCrashOffsets are the offsets committed by each group before the
// deletion of topic t: a topic t created again must never see them.
var deleteCrashOffsets = map[TopicPartition]OffsetAndMetadata{
	{"t", 0}: {42, "old"}, {"t", 1}: {7, ""}, {"u", 0}: {9, "kept"},
}

// TestDeleteTopicCrash kills a process (SIGKILL) at each step of
// DeleteTopic: after its deletion intent, after its tombstones, after its
// renames, and after it returned. The tombstones used to be written after
// the renames: a crash between them left the renamed directories (which
// Open removed) and the offsets, a second DeleteTopic answered
// UNKNOWN_TOPIC_OR_PARTITION before reaching them, and the topic created
// again resumed its groups at the old topic's offsets, skipping records of
// the new log. After every crash the topic must be gone once the engine
// is open (Open finishes a deletion cut short), a topic created again
// under its name must be empty and without committed offsets, before and
// after another restart, and the other topic's offsets must be intact.
func TestDeleteTopicCrash(t *testing.T) {
	for _, policy := range []string{"always", "never"} {
		for _, step := range []string{"intent", "tombstones", "renames", "returned"} {
			t.Run(policy+"/"+step, func(t *testing.T) {
				dir := t.TempDir()
				child := testutil.StartChild(t, "TestDeleteTopicCrashChild",
					deleteCrashDirEnv+"="+dir, deleteCrashStepEnv+"="+step, deleteCrashPolicyEnv+"="+policy)
				if res := child.Watch(t, step, killAtStep(child, step)); !res.Killed {
					t.Fatalf("the child was not killed at its step: %v", res.Err)
				}
				opts := powerLossOptions(t, policy)
				e := openEngine(t, dir, opts)
				if _, ok := e.Topics()["t"]; ok {
					t.Fatal("the topic is still there after Open")
				}
				checkDeletedTopicOffsets(t, e, "after the crash")
				if err := e.CreateTopic("t", 2); err != nil {
					t.Fatal(err)
				}
				for i := range 2 {
					p, err := e.Partition("t", i)
					if err != nil {
						t.Fatal(err)
					}
					if hw := p.log.HighWatermark(); hw != 0 {
						t.Fatalf("t-%d created again holds %d records of the deleted topic", i, hw)
					}
				}
				checkDeletedTopicOffsets(t, e, "after the topic was created again")
				if err := e.Close(); err != nil {
					t.Fatal(err)
				}
				e = openEngine(t, dir, opts)
				defer e.Close()
				checkDeletedTopicOffsets(t, e, "after another restart")
			})
		}
	}
}

// checkDeletedTopicOffsets fails unless groups g1 and g2 have no offset of
// topic t and keep their offset of u-0.
func checkDeletedTopicOffsets(t *testing.T, e *Engine, when string) {
	t.Helper()
	for _, g := range []string{"g1", "g2"} {
		got, err := e.fetchOffsets(g, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		for tp, om := range got {
			if tp.Topic == "t" {
				t.Errorf("%s: group %s has offset %d of %s-%d, committed before the topic's deletion", when, g, om.Offset, tp.Topic, tp.Partition)
			}
		}
		if om := got[TopicPartition{"u", 0}]; om != deleteCrashOffsets[TopicPartition{"u", 0}] {
			t.Errorf("%s: group %s's offset of u-0 is %+v, want %+v", when, g, om, deleteCrashOffsets[TopicPartition{"u", 0}])
		}
	}
}

// TestDeleteTopicCrashChild is the child of TestDeleteTopicCrash: it makes
// topics t and u, writes to t, commits two groups' offsets, deletes t and
// reports the step named in its environment, then waits to be killed.
func TestDeleteTopicCrashChild(t *testing.T) {
	dir, step := os.Getenv(deleteCrashDirEnv), os.Getenv(deleteCrashStepEnv)
	if dir == "" {
		t.Skip("run by TestDeleteTopicCrash")
	}
	fail := func(err error) {
		fmt.Println("error", err)
		time.Sleep(time.Hour)
	}
	e, err := Open(dir, powerLossOptions(t, os.Getenv(deleteCrashPolicyEnv)))
	if err != nil {
		fail(err)
	}
	for topic, n := range map[string]int{"t": 2, "u": 1} {
		if err := e.CreateTopic(topic, n); err != nil {
			fail(err)
		}
	}
	for i := range 2 {
		p, _ := e.Partition("t", i)
		for range 3 {
			if _, err := p.Append(valueBatch(t, -1, 0, false, 'o')); err != nil {
				fail(err)
			}
		}
	}
	for _, g := range []string{"g1", "g2"} {
		if err := e.Frontend().CommitOffsets(g, deleteCrashOffsets); err != nil {
			fail(err)
		}
	}
	e.opts.private.deleteTopicStepHook = func(s string) {
		if s == step {
			fmt.Println("at " + s)
			time.Sleep(time.Hour)
		}
	}
	if err := e.DeleteTopic("t"); err != nil {
		fail(err)
	}
	fmt.Println("at returned")
	time.Sleep(time.Hour)
}

// TestDeleteTopicPowerCut: under "never" the tombstones of a deleted
// topic's offsets are synced before its directories are renamed. Left to
// the policy, a power cut kept the renames (the data dir is synced) and
// lost the tombstones, and the topic created again found the old offsets.
func TestDeleteTopicPowerCut(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := powerLossOptions(t, "never")
	e := openEngine(t, dir, opts)
	for topic, n := range map[string]int{"t": 2, "u": 1} {
		if err := e.CreateTopic(topic, n); err != nil {
			t.Fatal(err)
		}
	}
	for _, g := range []string{"g1", "g2"} {
		if err := e.Frontend().CommitOffsets(g, deleteCrashOffsets); err != nil {
			t.Fatal(err)
		}
		p, err := e.Partition(ConsumerOffsetsTopic, groupPartition(g))
		if err != nil {
			t.Fatal(err)
		}
		if err := p.log.Flush(); err != nil { // the commits are durable
			t.Fatal(err)
		}
	}
	if err := e.DeleteTopic("t"); err != nil {
		t.Fatal(err)
	}
	cutPower(t, e)
	e = openEngine(t, dir, opts)
	defer e.Close()
	checkDeletedTopicOffsets(t, e, "after the power cut")
	if err := e.CreateTopic("t", 2); err != nil {
		t.Fatal(err)
	}
	checkDeletedTopicOffsets(t, e, "after the topic was created again")
}
