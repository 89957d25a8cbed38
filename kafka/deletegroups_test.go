package kafka

import (
	"fmt"
	"testing"
	"time"

	"github.com/idemlog/idemlog/engine"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDeleteGroupsErasesNewMembersCommit: DeleteGroups forgets the
// group in the coordinator (group.DeleteGroup) and then, outside the
// group's lock, deletes its offsets (engine.DeleteGroupOffsets). A consumer
// that joins the group and commits in between has its acknowledged commit
// erased by a deletion that, by then, was of a group with a member (Kafka
// deletes the group and writes the tombstones as one step under the group
// lock; a later join starts a new group whose commits stay).
func TestDeleteGroupsErasesNewMembersCommit(t *testing.T) {
	gate := newGroupGate()
	s := newGroupServer(t, gate)
	// The group has an offset and no members.
	a := groupStable(t, s, "g")
	if code := groupCommit(s, "g", a, 1, 10); code != 0 {
		t.Fatalf("commit: code %d", code)
	}
	lv := kmsg.NewPtrLeaveGroupRequest()
	lv.Version, lv.Group, lv.MemberID = 0, "g", a
	if code := s.groups.LeaveGroup(lv).ErrorCode; code != 0 {
		t.Fatalf("leave: code %d", code)
	}

	// A transactional commit of another group on the same
	// __consumer_offsets partition holds its append mutex, which the
	// deletion of g's offsets waits for.
	other, fe := "", s.eng.Frontend()
	for i := 0; ; i++ {
		if other = fmt.Sprintf("other-%d", i); fe.GroupPartition(other) == fe.GroupPartition("g") {
			break
		}
	}
	gate.arm("txnCommitOffsets")
	txn := groupAsync(func() error {
		return s.eng.Frontend().TxnCommitOffsets(other, 1000, 0, map[engine.TopicPartition]engine.OffsetAndMetadata{{Topic: "t", Partition: 0}: {Offset: 1}})
	})
	gate.waitHit(t)

	del := groupAsync(func() int16 {
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Version = 2
		req.Groups = []string{"g"}
		return s.deleteGroups(req).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode
	})
	// A new consumer joins g and commits 77.
	joined := groupAsync(func() error {
		deadline := time.Now().Add(10 * time.Second)
		for { // wait for the deletion to have reached the coordinator
			if _, _, _, _, ok := s.groups.Describe("g"); !ok {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("group never deleted from the coordinator")
			}
			time.Sleep(time.Millisecond)
		}
		b, err := groupTryStable(s, "g")
		if err != nil {
			return err
		}
		if code := groupCommit(s, "g", b, 1, 77); code != 0 {
			return fmt.Errorf("new member's commit: code %d", code)
		}
		return nil
	})
	select {
	case err := <-joined:
		joined = groupAsync(func() error { return err })
	case <-time.After(3 * time.Second):
	}
	close(gate.release)
	if err := groupRecv(t, txn, "txn commit"); err != nil {
		t.Fatal(err)
	}
	if code := groupRecv(t, del, "delete"); code != 0 {
		t.Fatalf("delete: code %d", code)
	}
	if err := groupRecv(t, joined, "new member"); err != nil {
		t.Fatal(err)
	}
	st, _, _, members, _ := s.groups.Describe("g")
	if got := groupCommitted(t, s, "g"); got != 77 {
		t.Fatalf("committed offset %d; the new member's acknowledged commit of 77 is gone while the group is %s with %d member(s)", got, st, len(members))
	}
}
