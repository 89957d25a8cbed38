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
