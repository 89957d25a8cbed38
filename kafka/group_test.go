package kafka

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/kafka/group"
	"github.com/idemlog/idemlog/partition"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupGate is the engine's clock, which parks the first call made from
// inside the function named fn (matched in the caller's stack) once armed,
// until release is closed. The engine reads its clock in CommitOffsets
// before the write and in txnCommitOffsets while holding the offsets
// partition's append mutex, so a test can stop either at that point.
type groupGate struct {
	fn      atomic.Pointer[string]
	hit     chan struct{}
	release chan struct{}
}

func newGroupGate() *groupGate {
	return &groupGate{hit: make(chan struct{}), release: make(chan struct{})}
}

func (g *groupGate) arm(fn string) { g.fn.Store(&fn) }

func (g *groupGate) now() time.Time {
	if fn := g.fn.Load(); fn != nil {
		buf := make([]byte, 16<<10)
		st := string(buf[:runtime.Stack(buf, false)])
		if strings.Contains(st, *fn) && g.fn.CompareAndSwap(fn, nil) {
			close(g.hit)
			<-g.release
		}
	}
	return time.Now()
}

func (g *groupGate) waitHit(t *testing.T) {
	t.Helper()
	select {
	case <-g.hit:
	case <-time.After(10 * time.Second):
		t.Fatal("gate never hit")
	}
}

// newGroupServer is a Server (not listening: tests call its handlers)
// over an engine whose clock is gate.
func newGroupServer(t *testing.T, gate *groupGate) *Server {
	t.Helper()
	e, err := engine.Open(t.TempDir(), engine.Options{Now: gate.now, Partition: partition.Options{}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(e, Options{
		Logger: slog.New(slog.DiscardHandler),
		Group:  group.Options{MinSessionTimeout: 100 * time.Millisecond, MaxSessionTimeout: time.Minute},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		e.Close()
	})
	if err := e.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	// Open the offsets store now, so that the gate stops a commit at its
	// write and not at the store's lazy opening.
	if _, err := e.Frontend().FetchOffsets("g", nil, false); err != nil {
		t.Fatal(err)
	}
	return s
}

func groupAsync[T any](f func() T) <-chan T {
	ch := make(chan T, 1)
	go func() { ch <- f() }()
	return ch
}

func groupRecv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no result", what)
		panic("unreachable")
	}
}

// groupJoin is a JoinGroup v3 (no MEMBER_ID_REQUIRED round).
func groupJoin(s *Server, g, memberID string) *kmsg.JoinGroupResponse {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = 3
	req.Group = g
	req.MemberID = memberID
	req.SessionTimeoutMillis = 10000
	req.RebalanceTimeoutMillis = 10000
	req.ProtocolType = "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", []byte("m")
	req.Protocols = []kmsg.JoinGroupRequestProtocol{p}
	return s.groups.JoinGroup(group.WithClientID(context.Background(), "cl"), req)
}

func groupSync(s *Server, g, memberID string, gen int32, plan []string) *kmsg.SyncGroupResponse {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = 2
	req.Group, req.MemberID, req.Generation = g, memberID, gen
	for _, id := range plan {
		a := kmsg.NewSyncGroupRequestGroupAssignment()
		a.MemberID, a.MemberAssignment = id, []byte("a")
		req.GroupAssignment = append(req.GroupAssignment, a)
	}
	return s.groups.SyncGroup(context.Background(), req)
}

func groupCommit(s *Server, g, memberID string, gen int32, offset int64) int16 {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 7
	req.Group, req.MemberID, req.Generation = g, memberID, gen
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, offset
	rt.Partitions = []kmsg.OffsetCommitRequestTopicPartition{rp}
	req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
	resp := s.offsetCommit(req).(*kmsg.OffsetCommitResponse)
	return resp.Topics[0].Partitions[0].ErrorCode
}

func groupCommitted(t *testing.T, s *Server, g string) int64 {
	t.Helper()
	tp := engine.TopicPartition{Topic: "t", Partition: 0}
	got, err := s.eng.Frontend().FetchOffsets(g, []engine.TopicPartition{tp}, false)
	if err != nil {
		t.Fatal(err)
	}
	om, ok := got[tp]
	if !ok {
		return -1
	}
	return om.Offset
}

// groupStable has one member join "g" and sync as leader; it returns the
// member id at generation 1.
func groupStable(t *testing.T, s *Server, g string) string {
	t.Helper()
	id, err := groupTryStable(s, g)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func groupTryStable(s *Server, g string) (string, error) {
	j := groupJoin(s, g, "")
	if j.ErrorCode != 0 {
		return "", fmt.Errorf("join: code %d", j.ErrorCode)
	}
	if sr := groupSync(s, g, j.MemberID, j.Generation, []string{j.MemberID}); sr.ErrorCode != 0 {
		return "", fmt.Errorf("sync: code %d", sr.ErrorCode)
	}
	return j.MemberID, nil
}

func groupState(s *Server, g string) string {
	st, _, _, _, _ := s.groups.Describe(g)
	return st
}

func groupWaitState(s *Server, g, want string) error {
	deadline := time.Now().Add(10 * time.Second)
	for groupState(s, g) != want {
		if time.Now().After(deadline) {
			return fmt.Errorf("group %s never %s (is %s)", g, want, groupState(s, g))
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

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
