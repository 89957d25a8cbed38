package kafka

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestStaleGenerationCommitAfterRebalance: OffsetCommit checks the
// member and generation (the group check, under the group's lock) and
// then writes the offsets (engine.CommitOffsets) after releasing it. A
// rebalance in between lets a commit of the old generation land after the
// new generation's owner committed, overwriting it, and the stale member
// is told it succeeded. In Kafka the check and the append are one step
// under the group lock, so the log order is the validation order: the
// stale commit either precedes the new owner's or fails with
// ILLEGAL_GENERATION / REBALANCE_IN_PROGRESS.
func TestStaleGenerationCommitAfterRebalance(t *testing.T) {
	gate := newGroupGate()
	s := newGroupServer(t, gate)
	a := groupStable(t, s, "g")

	// A commits 50 at generation 1; the write is held after the check.
	gate.arm("Frontend.CommitOffsets")
	aCommit := groupAsync(func() int16 { return groupCommit(s, "g", a, 1, 50) })
	gate.waitHit(t)

	// Meanwhile B joins, A rejoins, generation 2 is synced and B, the
	// partition's new owner, commits 100.
	rebalanced := groupAsync(func() error {
		bj := groupAsync(func() *kmsg.JoinGroupResponse { return groupJoin(s, "g", "") })
		if err := groupWaitState(s, "g", "PreparingRebalance"); err != nil {
			return err
		}
		aj := groupJoin(s, "g", a)
		b := <-bj
		if aj.ErrorCode != 0 || b.ErrorCode != 0 || aj.Generation != 2 {
			return fmt.Errorf("rejoin: codes %d/%d generation %d", aj.ErrorCode, b.ErrorCode, aj.Generation)
		}
		bs := groupAsync(func() *kmsg.SyncGroupResponse { return groupSync(s, "g", b.MemberID, 2, nil) })
		if sr := groupSync(s, "g", a, 2, []string{a, b.MemberID}); sr.ErrorCode != 0 {
			return fmt.Errorf("leader sync: code %d", sr.ErrorCode)
		}
		if sr := <-bs; sr.ErrorCode != 0 {
			return fmt.Errorf("follower sync: code %d", sr.ErrorCode)
		}
		if code := groupCommit(s, "g", b.MemberID, 2, 100); code != 0 {
			return fmt.Errorf("generation 2 commit: code %d", code)
		}
		return nil
	})
	// A coordinator that writes under the group lock keeps the rebalance
	// waiting on A's write: let it go after a while.
	select {
	case err := <-rebalanced:
		rebalanced = groupAsync(func() error { return err })
	case <-time.After(3 * time.Second):
		t.Log("rebalance held by the generation 1 commit")
	}
	close(gate.release)
	aCode := groupRecv(t, aCommit, "generation 1 commit")
	if err := groupRecv(t, rebalanced, "rebalance"); err != nil {
		t.Fatal(err)
	}
	if got := groupCommitted(t, s, "g"); got != 100 {
		t.Fatalf("committed offset %d after generation 2's owner committed 100 (the generation 1 commit was answered code %d)", got, aCode)
	}
}

// TestCommitMetadataTooLarge: Kafka bounds a committed offset's
// metadata by offset.metadata.max.bytes (4096 by default) and answers
// OFFSET_METADATA_TOO_LARGE (12) on that partition alone, committing the
// others (OffsetMetadataManager.commitOffset / validateOffsetMetadataLength).
// Here any metadata up to 32767 bytes is stored, and a longer one fails
// every partition of the request with INVALID_REQUEST (42) (engine
// offsetsPartitionOf).
func TestCommitMetadataTooLarge(t *testing.T) {
	s := newGroupServer(t, newGroupGate())
	if err := s.eng.CreateTopic("m", 2); err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{4097, 40000} {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = 7
		req.Group, req.Generation = fmt.Sprintf("simple-%d", size), -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "m"
		big, small := strings.Repeat("x", size), "ok"
		for i, md := range []*string{&big, &small} {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.Metadata = int32(i), 5, md
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
		resp := s.offsetCommit(req).(*kmsg.OffsetCommitResponse)
		got := []int16{resp.Topics[0].Partitions[0].ErrorCode, resp.Topics[0].Partitions[1].ErrorCode}
		if got[0] != 12 || got[1] != 0 {
			t.Fatalf("metadata of %d bytes: partition codes %v, want [12 0] (OFFSET_METADATA_TOO_LARGE on that partition only)", size, got)
		}
	}
}

// A commit the group refuses still answers UNKNOWN_TOPIC_OR_PARTITION for
// the partitions the engine does not have: Kafka's API layer filters those
// before the group coordinator sees the request.
func TestCommitUnknownTopicCodeWithGroupError(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	rc := dial(t, ts.addr)
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 8
	req.Group, req.Generation, req.MemberID = "nog", 5, "m"
	for _, topic := range []string{"t", "nope"} {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = topic
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Offset = 1
		rt.Partitions = append(rt.Partitions, p)
		req.Topics = append(req.Topics, rt)
	}
	resp := rc.roundTrip(req).(*kmsg.OffsetCommitResponse)
	want := map[string]int16{"t": 22, "nope": 3} // ILLEGAL_GENERATION, UNKNOWN_TOPIC_OR_PARTITION
	for _, rt := range resp.Topics {
		if c := rt.Partitions[0].ErrorCode; c != want[rt.Topic] {
			t.Errorf("%s: code %d, want %d", rt.Topic, c, want[rt.Topic])
		}
	}
}
