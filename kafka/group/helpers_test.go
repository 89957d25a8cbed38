package group

import (
	"context"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemlog/idemlog/errcode"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka codes as the tests expect them on the wire, spelled out so that a
// wrong mapping in the package cannot hide behind its own constants.
const (
	wantNone                = 0
	wantCoordNotAvailable   = 15
	wantIllegalGeneration   = 22
	wantInconsistent        = 23
	wantInvalidGroupID      = 24
	wantUnknownMember       = 25
	wantInvalidSession      = 26
	wantRebalanceInProgress = 27
	wantInvalidRequest      = 42
	wantNonEmptyGroup       = 68
	wantGroupIDNotFound     = 69
	wantMemberIDRequired    = 79
	wantFencedInstance      = 82
)

// testOpts are fast timeouts: session timeouts as low as 1ms are allowed.
func testOpts() Options {
	return Options{MinSessionTimeout: time.Millisecond, MaxSessionTimeout: time.Minute}
}

func newTestCoordinator(t *testing.T, opts Options) *Coordinator {
	t.Helper()
	c := New(opts)
	t.Cleanup(c.Close)
	return c
}

// roundTrip encodes a message at its version and decodes it into a fresh
// value, as the wire does: fields the version lacks are lost, and the
// coordinator must not depend on them nor fail to encode what it returns.
func roundTrip[T interface {
	SetVersion(int16)
	GetVersion() int16
	AppendTo([]byte) []byte
	ReadFrom([]byte) error
}](t testing.TB, in T, fresh T) T {
	t.Helper()
	fresh.SetVersion(in.GetVersion())
	if err := fresh.ReadFrom(in.AppendTo(nil)); err != nil {
		t.Fatalf("cannot decode %T v%d: %v", in, in.GetVersion(), err)
	}
	return fresh
}

type proto struct{ name, meta string }

func protos(ps ...proto) []kmsg.JoinGroupRequestProtocol {
	out := make([]kmsg.JoinGroupRequestProtocol, 0, len(ps))
	for _, p := range ps {
		jp := kmsg.NewJoinGroupRequestProtocol()
		jp.Name = p.name
		jp.Metadata = []byte(p.meta)
		out = append(out, jp)
	}
	return out
}

var rangeOnly = []proto{{"range", "topics:a"}}

// client is a simulated group member speaking kmsg to the coordinator.
type client struct {
	t         testing.TB
	c         *Coordinator
	group     string
	clientID  string
	host      string // the client host the listener would put in the context
	version   int16  // JoinGroup version; the others are derived from it
	instance  *string
	ptype     string
	protocols []proto
	session   time.Duration
	rebalance time.Duration

	id      string
	gen     int32
	leader  string
	proto   string
	members []kmsg.JoinGroupResponseMember
	skip    bool
}

func newClient(t testing.TB, c *Coordinator, group string, version int16) *client {
	return &client{
		t: t, c: c, group: group, clientID: "cl", version: version,
		ptype: "consumer", protocols: rangeOnly,
		session: 10 * time.Second, rebalance: 10 * time.Second,
		gen: -1,
	}
}

func (cl *client) static(instance string) *client {
	cl.instance = &instance
	return cl
}

func (cl *client) isLeader() bool { return cl.id != "" && cl.id == cl.leader }

func (cl *client) joinRequest() *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = cl.version
	req.Group = cl.group
	req.SessionTimeoutMillis = int32(cl.session / time.Millisecond)
	req.RebalanceTimeoutMillis = int32(cl.rebalance / time.Millisecond)
	req.MemberID = cl.id
	req.InstanceID = cl.instance
	req.ProtocolType = cl.ptype
	req.Protocols = protos(cl.protocols...)
	return roundTrip(cl.t, req, kmsg.NewPtrJoinGroupRequest())
}

// joinOnce sends one JoinGroup and records what it learns.
func (cl *client) joinOnce(ctx context.Context) *kmsg.JoinGroupResponse {
	ctx = WithClientID(ctx, cl.clientID)
	if cl.host != "" {
		ctx = WithClientHost(ctx, cl.host)
	}
	resp := roundTrip(cl.t, cl.c.JoinGroup(ctx, cl.joinRequest()), kmsg.NewPtrJoinGroupResponse())
	switch resp.ErrorCode {
	case wantNone:
		cl.id, cl.gen, cl.leader, cl.members, cl.skip = resp.MemberID, resp.Generation, resp.LeaderID, resp.Members, resp.SkipAssignment
		cl.proto = ""
		if resp.Protocol != nil {
			cl.proto = *resp.Protocol
		}
	case wantMemberIDRequired:
		cl.id = resp.MemberID
	case wantUnknownMember, wantFencedInstance:
		cl.id, cl.gen = "", -1
	}
	return resp
}

// join runs the whole join, answering MEMBER_ID_REQUIRED as kgo does.
func (cl *client) join(ctx context.Context) *kmsg.JoinGroupResponse {
	resp := cl.joinOnce(ctx)
	if resp.ErrorCode == wantMemberIDRequired {
		resp = cl.joinOnce(ctx)
	}
	return resp
}

func (cl *client) mustJoin(ctx context.Context) *kmsg.JoinGroupResponse {
	cl.t.Helper()
	resp := cl.join(ctx)
	if resp.ErrorCode != wantNone {
		cl.t.Fatalf("join of %s: code %d", cl.group, resp.ErrorCode)
	}
	return resp
}

func (cl *client) syncRequest(plan map[string]string) *kmsg.SyncGroupRequest {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = cl.syncVersion()
	req.Group = cl.group
	req.Generation = cl.gen
	req.MemberID = cl.id
	req.InstanceID = cl.instance
	pt, p := cl.ptype, cl.proto
	req.ProtocolType, req.Protocol = &pt, &p
	ids := make([]string, 0, len(plan))
	for id := range plan {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		a := kmsg.NewSyncGroupRequestGroupAssignment()
		a.MemberID = id
		a.MemberAssignment = []byte(plan[id])
		req.GroupAssignment = append(req.GroupAssignment, a)
	}
	return roundTrip(cl.t, req, kmsg.NewPtrSyncGroupRequest())
}

// Versions of the other group requests that shipped with each JoinGroup
// version (Kafka 0.9 to 3.x), as version negotiation against a broker of
// that age would pick them.
var (
	syncVersions  = [10]int16{0, 0, 1, 2, 2, 3, 4, 5, 5, 5}
	hbVersions    = [10]int16{0, 0, 1, 2, 2, 3, 4, 4, 4, 4}
	leaveVersions = [10]int16{0, 0, 1, 2, 2, 3, 4, 4, 5, 5}
)

func (cl *client) syncVersion() int16 { return syncVersions[cl.version] }
func (cl *client) hbVersion() int16   { return hbVersions[cl.version] }

func (cl *client) sync(ctx context.Context, plan map[string]string) *kmsg.SyncGroupResponse {
	return roundTrip(cl.t, cl.c.SyncGroup(ctx, cl.syncRequest(plan)), kmsg.NewPtrSyncGroupResponse())
}

func (cl *client) heartbeat() int16 {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version = cl.hbVersion()
	req.Group = cl.group
	req.Generation = cl.gen
	req.MemberID = cl.id
	req.InstanceID = cl.instance
	req = roundTrip(cl.t, req, kmsg.NewPtrHeartbeatRequest())
	return roundTrip(cl.t, cl.c.Heartbeat(req), kmsg.NewPtrHeartbeatResponse()).ErrorCode
}

func (cl *client) leave() int16 {
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group = cl.group
	req.Version = leaveVersions[cl.version]
	if req.Version >= 3 {
		m := kmsg.NewLeaveGroupRequestMember()
		m.MemberID, m.InstanceID = cl.id, cl.instance
		req.Members = []kmsg.LeaveGroupRequestMember{m}
	} else {
		req.MemberID = cl.id
	}
	req = roundTrip(cl.t, req, kmsg.NewPtrLeaveGroupRequest())
	resp := roundTrip(cl.t, cl.c.LeaveGroup(req), kmsg.NewPtrLeaveGroupResponse())
	cl.id, cl.gen = "", -1
	if req.Version >= 3 && resp.ErrorCode == wantNone {
		return resp.Members[0].ErrorCode
	}
	return resp.ErrorCode
}

func (cl *client) commit(txn bool) error {
	return cl.c.Commit(cl.group, cl.gen, cl.id, cl.instance, txn, noWrite)
}

// async runs f in a goroutine; the channel yields its result.
func async[T any](f func() T) <-chan T {
	ch := make(chan T, 1)
	go func() { ch <- f() }()
	return ch
}

func recv[T any](t testing.TB, ch <-chan T, within time.Duration) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(within):
		t.Fatalf("no result within %v", within)
		panic("unreachable")
	}
}

func notYet[T any](t testing.TB, ch <-chan T, wait time.Duration) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("returned early: %+v", v)
	case <-time.After(wait):
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// parked reports how many JoinGroup calls the group holds, so a test can
// wait until a goroutine's join has really arrived.
func parked(c *Coordinator, name string) int {
	g := c.locked(name, false)
	if g == nil {
		return 0
	}
	defer g.mu.Unlock()
	return g.awaitingJoin
}

func parkedSyncs(c *Coordinator, name string) int {
	g := c.locked(name, false)
	if g == nil {
		return 0
	}
	defer g.mu.Unlock()
	n := 0
	for _, m := range g.members {
		if m.sync != nil {
			n++
		}
	}
	return n
}

type described struct {
	state    string
	gen      int32
	protocol string
	members  []string
}

func describe(t testing.TB, c *Coordinator, name string) described {
	t.Helper()
	st, gen, p, ms, ok := c.Describe(name)
	if !ok {
		t.Fatalf("group %q unknown", name)
	}
	return described{st, gen, p, ms}
}

func wantCode(t testing.TB, what string, got, want int16) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: code %d, want %d", what, got, want)
	}
}

func wantErrCode(t testing.TB, what string, err error, want int16) {
	t.Helper()
	if got := errcode.Code(err); got != want {
		t.Fatalf("%s: %v (code %d), want code %d", what, err, got, want)
	}
	if want != 0 && !strings.HasPrefix(err.Error(), "cannot ") {
		t.Fatalf("%s: error %q does not say what could not be done", what, err)
	}
}

// stableGroup joins and syncs the clients in order, leader first, each
// getting "<id>" as its assignment, and returns when all are Stable.
func stableGroup(t testing.TB, cls ...*client) {
	t.Helper()
	ctx := context.Background()
	joins := make([]<-chan *kmsg.JoinGroupResponse, len(cls))
	for i, cl := range cls {
		joins[i] = async(func() *kmsg.JoinGroupResponse { return cl.join(ctx) })
		if i == 0 {
			// The first join completes alone (no initial delay); the
			// others then rejoin it in one more generation.
			wantCode(t, "first join", recv(t, joins[0], 5*time.Second).ErrorCode, wantNone)
		}
	}
	if len(cls) > 1 {
		// Everyone but the first is parked; the first must rejoin.
		waitFor(t, 5*time.Second, "joins parked", func() bool { return parked(cls[0].c, cls[0].group) == len(cls)-1 })
		joins[0] = async(func() *kmsg.JoinGroupResponse { return cls[0].join(ctx) })
		for i := range cls {
			wantCode(t, fmt.Sprintf("join %d", i), recv(t, joins[i], 5*time.Second).ErrorCode, wantNone)
		}
	}
	syncAll(t, cls...)
}

// syncAll syncs clients of one generation, the leader with an assignment
// of "<member id>" for each member it was given.
func syncAll(t testing.TB, cls ...*client) {
	t.Helper()
	ctx := context.Background()
	var leader *client
	for _, cl := range cls {
		if cl.isLeader() {
			leader = cl
		}
	}
	if leader == nil {
		t.Fatalf("no leader among %d clients", len(cls))
	}
	syncs := make([]<-chan *kmsg.SyncGroupResponse, len(cls))
	for i, cl := range cls {
		if cl == leader {
			continue
		}
		syncs[i] = async(func() *kmsg.SyncGroupResponse { return cl.sync(ctx, nil) })
	}
	plan := make(map[string]string)
	for _, m := range leader.members {
		plan[m.MemberID] = "assigned:" + m.MemberID
	}
	for i, cl := range cls {
		var resp *kmsg.SyncGroupResponse
		if cl == leader {
			resp = cl.sync(ctx, plan)
		} else {
			resp = recv(t, syncs[i], 5*time.Second)
		}
		wantCode(t, "sync", resp.ErrorCode, wantNone)
		if got, want := string(resp.MemberAssignment), "assigned:"+cl.id; got != want {
			t.Fatalf("member %s got assignment %q, want %q", cl.id, got, want)
		}
	}
}

// checkGroup runs the group's internal invariants.
func checkGroup(t testing.TB, c *Coordinator, name string) {
	t.Helper()
	g := c.locked(name, false)
	if g == nil {
		return
	}
	err := g.checkInvariants()
	g.mu.Unlock()
	if err != nil {
		t.Fatalf("group %s: %v", name, err)
	}
}

// checkInvariants verifies the bookkeeping that every transition must keep.
func (g *group) checkInvariants() error {
	awaiting := 0
	supported := make(map[string]int)
	for id, m := range g.members {
		if m.id != id {
			return fmt.Errorf("member %s filed under %s", m.id, id)
		}
		if m.join != nil {
			awaiting++
			if m.join.m != m {
				return fmt.Errorf("member %s holds another member's join", id)
			}
		}
		if m.sync != nil && m.sync.m != m {
			return fmt.Errorf("member %s holds another member's sync", id)
		}
		for _, p := range m.protocols {
			supported[p.Name]++
		}
		if m.instanceID != nil && g.static[*m.instanceID] != id {
			return fmt.Errorf("static member %s not mapped from %s", id, *m.instanceID)
		}
		if _, ok := g.pending[id]; ok {
			return fmt.Errorf("member %s also pending", id)
		}
		if m.sync != nil && g.state != stateCompletingRebalance {
			return fmt.Errorf("member %s parked in sync while %s", id, g.state)
		}
	}
	if awaiting != g.awaitingJoin {
		return fmt.Errorf("awaitingJoin %d, %d members parked", g.awaitingJoin, awaiting)
	}
	if !maps.Equal(supported, g.supported) {
		return fmt.Errorf("supported %v, members list %v", g.supported, supported)
	}
	for inst, id := range g.static {
		if m := g.members[id]; m == nil || m.instanceID == nil || *m.instanceID != inst {
			return fmt.Errorf("instance %s maps to %s, not its member", inst, id)
		}
	}
	if (g.leader == "") != (len(g.members) == 0) {
		return fmt.Errorf("leader %q with %d members", g.leader, len(g.members))
	}
	if g.leader != "" && g.members[g.leader] == nil {
		return fmt.Errorf("leader %s not a member", g.leader)
	}
	for id := range g.pendingSync {
		if g.members[id] == nil {
			return fmt.Errorf("pending sync %s not a member", id)
		}
	}
	switch g.state {
	case stateEmpty:
		if len(g.members) != 0 {
			return fmt.Errorf("Empty with %d members", len(g.members))
		}
	case stateCompletingRebalance, stateStable:
		if len(g.members) == 0 {
			return fmt.Errorf("%s with no members", g.state)
		}
		if awaiting != 0 {
			return fmt.Errorf("%s with %d parked joins", g.state, awaiting)
		}
		if g.protocol == "" || g.supported[g.protocol] != len(g.members) {
			return fmt.Errorf("%s with protocol %q not shared by all", g.state, g.protocol)
		}
	}
	return nil
}

// noLeak fails if goroutines started during the test are still running at
// its end (timers run their callbacks on short-lived goroutines, so this
// waits a little for them).
func noLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(2 * time.Second)
		for runtime.NumGoroutine() > before {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<16)
				t.Fatalf("%d goroutines at start, %d now:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}

// noWrite is a commit that writes nothing (the check alone).
func noWrite() error { return nil }
