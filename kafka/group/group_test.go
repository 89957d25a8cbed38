package group

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/errcode"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var bg = context.Background()

func TestSentinelCodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		code int16
	}{
		{ErrCoordinatorNotAvailable, wantCoordNotAvailable},
		{ErrIllegalGeneration, wantIllegalGeneration},
		{ErrInconsistentGroupProtocol, wantInconsistent},
		{ErrInvalidGroupID, wantInvalidGroupID},
		{ErrUnknownMemberID, wantUnknownMember},
		{ErrInvalidSessionTimeout, wantInvalidSession},
		{ErrRebalanceInProgress, wantRebalanceInProgress},
		{ErrInvalidRequest, wantInvalidRequest},
		{ErrNonEmptyGroup, wantNonEmptyGroup},
		{ErrGroupIDNotFound, wantGroupIDNotFound},
		{ErrMemberIDRequired, wantMemberIDRequired},
		{ErrFencedInstanceID, wantFencedInstance},
	} {
		if got := errcode.Code(tc.err); got != tc.code {
			t.Errorf("%v: code %d, want %d", tc.err, got, tc.code)
		}
	}
	// The engine's fencing sentinels are shared, not duplicated.
	if ErrIllegalGeneration != engine.ErrIllegalGeneration || ErrUnknownMemberID != engine.ErrUnknownMemberID || ErrInvalidGroupID != engine.ErrInvalidGroupID {
		t.Fatal("group sentinels are not the engine's")
	}
}

// TestFirstJoinEveryVersion: one member forms a group at every JoinGroup
// version: MEMBER_ID_REQUIRED from v4, generation 1, leader of itself with
// the member list, then Stable with its own assignment after SyncGroup.
func TestFirstJoinEveryVersion(t *testing.T) {
	t.Parallel()
	for v := int16(0); v <= 9; v++ {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			c := newTestCoordinator(t, testOpts())
			cl := newClient(t, c, "g", v)
			cl.clientID = "kgo"
			resp := cl.joinOnce(bg)
			if v >= 4 {
				wantCode(t, "first join", resp.ErrorCode, wantMemberIDRequired)
				if !strings.HasPrefix(resp.MemberID, "kgo-") || len(resp.MemberID) != len("kgo-")+36 {
					t.Fatalf("member id %q is not kgo-<uuid>", resp.MemberID)
				}
				if resp.Generation != -1 {
					t.Fatalf("MEMBER_ID_REQUIRED with generation %d", resp.Generation)
				}
				if d := describe(t, c, "g"); d.state != "Empty" || len(d.members) != 0 {
					t.Fatalf("pending member made the group %+v", d)
				}
				resp = cl.joinOnce(bg)
			}
			wantCode(t, "join", resp.ErrorCode, wantNone)
			if resp.Generation != 1 || resp.LeaderID != resp.MemberID || resp.MemberID == "" {
				t.Fatalf("generation %d leader %q member %q", resp.Generation, resp.LeaderID, resp.MemberID)
			}
			if len(resp.Members) != 1 || resp.Members[0].MemberID != resp.MemberID || string(resp.Members[0].ProtocolMetadata) != "topics:a" {
				t.Fatalf("leader's members %+v", resp.Members)
			}
			if resp.Protocol == nil || *resp.Protocol != "range" {
				t.Fatalf("protocol %v", resp.Protocol)
			}
			if (v >= 7) != (resp.ProtocolType != nil) || (resp.ProtocolType != nil && *resp.ProtocolType != "consumer") {
				t.Fatalf("v%d protocol type %v", v, resp.ProtocolType)
			}
			if d := describe(t, c, "g"); d.state != "CompletingRebalance" || d.gen != 1 || d.protocol != "range" || !slices.Equal(d.members, []string{cl.id}) {
				t.Fatalf("after join: %+v", d)
			}
			// Kafka lets a member heartbeat between its JoinGroup and
			// SyncGroup responses.
			wantCode(t, "heartbeat before sync", cl.heartbeat(), wantNone)
			sr := cl.sync(bg, map[string]string{cl.id: "mine"})
			wantCode(t, "sync", sr.ErrorCode, wantNone)
			if string(sr.MemberAssignment) != "mine" {
				t.Fatalf("assignment %q", sr.MemberAssignment)
			}
			if cl.syncVersion() >= 5 && (sr.ProtocolType == nil || *sr.ProtocolType != "consumer" || sr.Protocol == nil || *sr.Protocol != "range") {
				t.Fatalf("sync v5 protocol %v/%v", sr.ProtocolType, sr.Protocol)
			}
			if d := describe(t, c, "g"); d.state != "Stable" || d.gen != 1 {
				t.Fatalf("after sync: %+v", d)
			}
			wantCode(t, "heartbeat", cl.heartbeat(), wantNone)
			checkGroup(t, c, "g")
		})
	}
}

func TestJoinValidation(t *testing.T) {
	t.Parallel()
	opts := testOpts()
	opts.MinSessionTimeout, opts.MaxSessionTimeout = time.Second, time.Minute
	c := newTestCoordinator(t, opts)
	for _, tc := range []struct {
		name   string
		edit   func(*client)
		code   int16
		member string
	}{
		{"empty group id", func(cl *client) { cl.group = "" }, wantInvalidGroupID, ""},
		{"empty group id echoes member", func(cl *client) { cl.group, cl.id = "", "m-1" }, wantInvalidGroupID, "m-1"},
		{"session below min", func(cl *client) { cl.session = 999 * time.Millisecond }, wantInvalidSession, ""},
		{"session above max", func(cl *client) { cl.session = time.Minute + time.Millisecond }, wantInvalidSession, ""},
		{"known member, unknown group", func(cl *client) { cl.id = "m-1" }, wantUnknownMember, "m-1"},
		{"no protocol type", func(cl *client) { cl.ptype = "" }, wantInconsistent, ""},
		{"no protocols", func(cl *client) { cl.protocols = nil }, wantInconsistent, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := newClient(t, c, "g", 9)
			cl.session = 10 * time.Second
			tc.edit(cl)
			req := cl.joinRequest()
			resp := roundTrip(t, c.JoinGroup(bg, req), kmsg.NewPtrJoinGroupResponse())
			wantCode(t, "join", resp.ErrorCode, tc.code)
			if resp.MemberID != tc.member || resp.Generation != -1 {
				t.Fatalf("member %q generation %d", resp.MemberID, resp.Generation)
			}
		})
	}
	// No rejected join may leave a group behind.
	if n := c.Groups(); n != 0 {
		t.Fatalf("%d groups after rejected joins", n)
	}
}

// TestPendingMember: a MEMBER_ID_REQUIRED id holds the next join phase back
// until it rejoins or its session timeout passes; an expired id is unknown.
func TestPendingMember(t *testing.T) {
	t.Parallel()
	c := newTestCoordinator(t, testOpts())
	a := newClient(t, c, "g", 9)
	stableGroup(t, a)

	b := newClient(t, c, "g", 4)
	b.session = 150 * time.Millisecond
	wantCode(t, "b first join", b.joinOnce(bg).ErrorCode, wantMemberIDRequired)
	if d := describe(t, c, "g"); d.state != "Stable" || len(d.members) != 1 {
		t.Fatalf("a pending member changed the group: %+v", d)
	}
	wantCode(t, "a heartbeat", a.heartbeat(), wantNone)

	// The leader's rejoin starts a rebalance that waits for b.
	start := time.Now()
	aj := async(func() *kmsg.JoinGroupResponse { return a.join(bg) })
	notYet(t, aj, 50*time.Millisecond)
	resp := recv(t, aj, 5*time.Second)
	wantCode(t, "a rejoin", resp.ErrorCode, wantNone)
	if el := time.Since(start); el < 100*time.Millisecond {
		t.Fatalf("join phase ended after %v, before b's pending id expired", el)
	}
	if resp.Generation != 2 || len(resp.Members) != 1 {
		t.Fatalf("generation %d members %+v", resp.Generation, resp.Members)
	}
	// b's id expired with its session.
	wantCode(t, "b late rejoin", b.joinOnce(bg).ErrorCode, wantUnknownMember)
	checkGroup(t, c, "g")
}

// TestSecondMemberRebalances: a new member parks and makes the group
// rebalance; the first learns it from its heartbeat, rejoins, and the
// leader's assignment reaches a follower that synced first.
func TestSecondMemberRebalances(t *testing.T) {
	t.Parallel()
	c := newTestCoordinator(t, testOpts())
	a := newClient(t, c, "g", 9)
	b := newClient(t, c, "g", 9)
	stableGroup(t, a)
	if a.gen != 1 {
		t.Fatalf("generation %d", a.gen)
	}

	bj := async(func() *kmsg.JoinGroupResponse { return b.join(bg) })
	waitFor(t, 5*time.Second, "b parked", func() bool { return parked(c, "g") == 1 })
	if d := describe(t, c, "g"); d.state != "PreparingRebalance" || d.gen != 1 {
		t.Fatalf("%+v", d)
	}
	wantCode(t, "a heartbeat", a.heartbeat(), wantRebalanceInProgress)
	// Kafka accepts commits of the current generation until it changes.
	if err := a.commit(false); err != nil {
		t.Fatalf("commit while preparing: %v", err)
	}
	notYet(t, bj, 20*time.Millisecond)

	ar := a.mustJoin(bg)
	br := recv(t, bj, 5*time.Second)
	wantCode(t, "b join", br.ErrorCode, wantNone)
	if ar.Generation != 2 || br.Generation != 2 {
		t.Fatalf("generations %d, %d", ar.Generation, br.Generation)
	}
	if ar.LeaderID != a.id || br.LeaderID != a.id {
		t.Fatalf("leaders %q, %q; want %q", ar.LeaderID, br.LeaderID, a.id)
	}
	if len(br.Members) != 0 {
		t.Fatalf("follower got members %+v", br.Members)
	}
	var ids []string
	for _, m := range ar.Members {
		ids = append(ids, m.MemberID)
		if string(m.ProtocolMetadata) != "topics:a" {
			t.Fatalf("metadata %q", m.ProtocolMetadata)
		}
	}
	if !slices.Equal(ids, []string{a.id, b.id}) {
		t.Fatalf("leader's members %v, want %v (join order)", ids, []string{a.id, b.id})
	}

	// The follower syncs first and waits for the leader.
	bs := async(func() *kmsg.SyncGroupResponse { return b.sync(bg, nil) })
	notYet(t, bs, 50*time.Millisecond)
	wantCode(t, "a heartbeat while completing", a.heartbeat(), wantNone)
	wantErrCode(t, "a commit while completing", a.commit(false), wantRebalanceInProgress)
	if err := a.commit(true); err != nil {
		t.Fatalf("txn commit while completing: %v", err)
	}
	// The leader leaves b out of its plan: b gets empty bytes.
	as := a.sync(bg, map[string]string{a.id: "pa", "not-a-member": "x"})
	wantCode(t, "a sync", as.ErrorCode, wantNone)
	if string(as.MemberAssignment) != "pa" {
		t.Fatalf("leader assignment %q", as.MemberAssignment)
	}
	bsr := recv(t, bs, 5*time.Second)
	wantCode(t, "b sync", bsr.ErrorCode, wantNone)
	if len(bsr.MemberAssignment) != 0 {
		t.Fatalf("unassigned follower got %q", bsr.MemberAssignment)
	}
	if d := describe(t, c, "g"); d.state != "Stable" || d.gen != 2 || len(d.members) != 2 {
		t.Fatalf("%+v", d)
	}
	wantCode(t, "a heartbeat", a.heartbeat(), wantNone)
	wantCode(t, "b heartbeat", b.heartbeat(), wantNone)
	checkGroup(t, c, "g")
}

// syncReq builds a SyncGroup of cl with edits.
func syncReq(t *testing.T, cl *client, edit func(*kmsg.SyncGroupRequest)) *kmsg.SyncGroupRequest {
	req := cl.syncRequest(nil)
	edit(req)
	return roundTrip(t, req, kmsg.NewPtrSyncGroupRequest())
}

func TestSyncErrors(t *testing.T) {
	t.Parallel()
	c := newTestCoordinator(t, testOpts())
	a := newClient(t, c, "g", 9)
	b := newClient(t, c, "g", 9)
	stableGroup(t, a, b)
	other := "connect"
	rr := "roundrobin"
	for _, tc := range []struct {
		name string
		edit func(*kmsg.SyncGroupRequest)
		code int16
	}{
		{"unknown member", func(r *kmsg.SyncGroupRequest) { r.MemberID = "nobody" }, wantUnknownMember},
		{"old generation", func(r *kmsg.SyncGroupRequest) { r.Generation-- }, wantIllegalGeneration},
		{"future generation", func(r *kmsg.SyncGroupRequest) { r.Generation++ }, wantIllegalGeneration},
		{"unknown group", func(r *kmsg.SyncGroupRequest) { r.Group = "h" }, wantUnknownMember},
		{"empty group id", func(r *kmsg.SyncGroupRequest) { r.Group = "" }, wantInvalidGroupID},
		{"protocol type", func(r *kmsg.SyncGroupRequest) { r.ProtocolType = &other }, wantInconsistent},
		{"protocol name", func(r *kmsg.SyncGroupRequest) { r.Protocol = &rr }, wantInconsistent},
		{"v5 null protocol type", func(r *kmsg.SyncGroupRequest) { r.ProtocolType = nil }, wantInconsistent},
		{"v5 null protocol", func(r *kmsg.SyncGroupRequest) { r.Protocol = nil }, wantInconsistent},
		{"v4 null protocol is fine", func(r *kmsg.SyncGroupRequest) { r.Version, r.Protocol = 4, nil }, wantNone},
		{"unknown instance", func(r *kmsg.SyncGroupRequest) { s := "i"; r.InstanceID = &s }, wantUnknownMember},
		{"stable resync", func(*kmsg.SyncGroupRequest) {}, wantNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := roundTrip(t, c.SyncGroup(bg, syncReq(t, b, tc.edit)), kmsg.NewPtrSyncGroupResponse())
			wantCode(t, "sync", resp.ErrorCode, tc.code)
			if tc.code == wantNone && string(resp.MemberAssignment) != "assigned:"+b.id {
				t.Fatalf("resync assignment %q", resp.MemberAssignment)
			}
			if tc.code != wantNone && len(resp.MemberAssignment) != 0 {
				t.Fatalf("error with assignment %q", resp.MemberAssignment)
			}
		})
	}
	// While preparing, SyncGroup of the old generation says rejoin.
	cj := async(func() *kmsg.JoinGroupResponse { return newClient(t, c, "g", 9).join(bg) })
	waitFor(t, 5*time.Second, "c parked", func() bool { return parked(c, "g") == 1 })
	wantCode(t, "sync while preparing", b.sync(bg, nil).ErrorCode, wantRebalanceInProgress)
	c.Close()
	wantCode(t, "parked join on close", recv(t, cj, 5*time.Second).ErrorCode, wantCoordNotAvailable)
}

func TestHeartbeatErrors(t *testing.T) {
	t.Parallel()
	c := newTestCoordinator(t, testOpts())
	a := newClient(t, c, "g", 9)
	b := newClient(t, c, "g", 9)
	stableGroup(t, a, b)
	hb := func(edit func(*kmsg.HeartbeatRequest)) int16 {
		req := kmsg.NewPtrHeartbeatRequest()
		req.Version = 4
		req.Group, req.Generation, req.MemberID = "g", b.gen, b.id
		edit(req)
		return roundTrip(t, c.Heartbeat(roundTrip(t, req, kmsg.NewPtrHeartbeatRequest())), kmsg.NewPtrHeartbeatResponse()).ErrorCode
	}
	inst := "i"
	for _, tc := range []struct {
		name string
		edit func(*kmsg.HeartbeatRequest)
		code int16
	}{
		{"ok", func(*kmsg.HeartbeatRequest) {}, wantNone},
		{"v0 ok", func(r *kmsg.HeartbeatRequest) { r.Version = 0 }, wantNone},
		{"unknown member", func(r *kmsg.HeartbeatRequest) { r.MemberID = "x" }, wantUnknownMember},
		{"empty member", func(r *kmsg.HeartbeatRequest) { r.MemberID = "" }, wantUnknownMember},
		{"old generation", func(r *kmsg.HeartbeatRequest) { r.Generation-- }, wantIllegalGeneration},
		{"unknown group", func(r *kmsg.HeartbeatRequest) { r.Group = "h" }, wantUnknownMember},
		{"empty group", func(r *kmsg.HeartbeatRequest) { r.Group = "" }, wantInvalidGroupID},
		{"unmapped instance", func(r *kmsg.HeartbeatRequest) { r.InstanceID = &inst }, wantUnknownMember},
		// Below v3 the instance id is not on the wire and cannot matter.
		{"instance ignored below v3", func(r *kmsg.HeartbeatRequest) { r.Version, r.InstanceID = 2, &inst }, wantNone},
	} {
		t.Run(tc.name, func(t *testing.T) { wantCode(t, "heartbeat", hb(tc.edit), tc.code) })
	}
}

// TestValidateCommit covers Kafka's OffsetCommit/TxnOffsetCommit fencing.
func TestValidateCommit(t *testing.T) {
	t.Parallel()
	c := newTestCoordinator(t, testOpts())
	// "e": Empty after its only member left, at generation 2.
	e := newClient(t, c, "e", 9)
	stableGroup(t, e)
	eid := e.id
	wantCode(t, "leave", e.leave(), wantNone)
	// "g": Stable at generation 2 with a dynamic and a static member.
	a := newClient(t, c, "g", 9)
	s := newClient(t, c, "g", 9).static("s")
	stableGroup(t, a, s)
	inst := func(s string) *string { return &s }
	for _, tc := range []struct {
		name     string
		group    string
		gen      int32
		member   string
		instance *string
		txn      bool
		code     int16
	}{
		{"simple commit, unknown group", "u", -1, "", nil, false, wantNone},
		{"simple txn commit, unknown group", "u", -1, "", nil, true, wantNone},
		{"member commit, unknown group", "u", 1, "m", nil, false, wantIllegalGeneration},
		{"member txn commit, unknown group", "u", 1, "m", nil, true, wantIllegalGeneration},
		{"simple commit, empty group", "e", -1, "", nil, false, wantNone},
		{"simple commit with stale member, empty group", "e", -1, "old", nil, false, wantNone},
		{"member commit, empty group", "e", 2, eid, nil, false, wantUnknownMember},
		{"member", "g", a.gen, a.id, nil, false, wantNone},
		{"member txn", "g", a.gen, a.id, nil, true, wantNone},
		{"static member", "g", s.gen, s.id, inst("s"), false, wantNone},
		{"static member without instance", "g", s.gen, s.id, nil, true, wantNone},
		{"old generation", "g", a.gen - 1, a.id, nil, false, wantIllegalGeneration},
		{"old generation txn", "g", a.gen - 1, a.id, nil, true, wantIllegalGeneration},
		{"unknown member", "g", a.gen, "x", nil, false, wantUnknownMember},
		{"unknown member txn", "g", a.gen, "x", nil, true, wantUnknownMember},
		{"instance of another member", "g", a.gen, a.id, inst("s"), true, wantFencedInstance},
		{"unknown instance", "g", a.gen, a.id, inst("t"), false, wantUnknownMember},
		{"simple commit, group with members", "g", -1, "", nil, false, wantUnknownMember},
		{"simple txn commit, group with members", "g", -1, "", nil, true, wantNone},
		{"generation -1 with a member id", "g", -1, a.id, nil, false, wantIllegalGeneration},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := c.Commit(tc.group, tc.gen, tc.member, tc.instance, tc.txn, noWrite)
			if tc.code == wantNone {
				if err != nil {
					t.Fatalf("unexpected %v", err)
				}
				return
			}
			wantErrCode(t, "commit", err, tc.code)
		})
	}
	// OffsetCommit v9+ answers GROUP_ID_NOT_FOUND there; the error says so.
	err := c.Commit("u", 1, "m", nil, false, noWrite)
	if !errors.Is(err, ErrGroupIDNotFound) || !errors.Is(err, ErrIllegalGeneration) {
		t.Fatalf("unknown group: %v", err)
	}
	if err := c.Commit("g", a.gen, "x", nil, false, noWrite); errors.Is(err, ErrGroupIDNotFound) {
		t.Fatalf("known group flagged not found: %v", err)
	}
	if n := c.Groups(); n != 2 {
		t.Fatalf("commits created groups: %d", n)
	}
}

// TestSessionExpiry: a member that stops heartbeating is removed after its
// session timeout and the group rebalances without it.
func TestSessionExpiry(t *testing.T) {
	t.Parallel()
	c := newTestCoordinator(t, testOpts())
	a := newClient(t, c, "g", 9)
	b := newClient(t, c, "g", 9)
	b.session = 300 * time.Millisecond
	stableGroup(t, a, b)
	start := time.Now()
	for {
		code := a.heartbeat()
		if code == wantRebalanceInProgress {
			break
		}
		wantCode(t, "a heartbeat", code, wantNone)
		if time.Since(start) > 5*time.Second {
			t.Fatal("b never expired")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if el := time.Since(start); el < 150*time.Millisecond {
		t.Fatalf("b expired after %v, session is 300ms", el)
	}
	gen := a.gen
	resp := a.mustJoin(bg)
	if resp.Generation != gen+1 || len(resp.Members) != 1 || resp.Members[0].MemberID != a.id {
		t.Fatalf("generation %d members %+v", resp.Generation, resp.Members)
	}
	wantCode(t, "b heartbeat", b.heartbeat(), wantUnknownMember)
	wantErrCode(t, "b commit", b.commit(false), wantUnknownMember)
	checkGroup(t, c, "g")
}

// TestRebalanceTimeout: members that do not rejoin within the rebalance
// timeout are dropped from the generation; the leader is re-elected among
// those that rejoined.
func TestRebalanceTimeout(t *testing.T) {
	t.Parallel()
	for _, leaderStays := range []bool{true, false} {
		t.Run(fmt.Sprintf("leader rejoins=%v", leaderStays), func(t *testing.T) {
			c := newTestCoordinator(t, testOpts())
			a := newClient(t, c, "g", 9)
			b := newClient(t, c, "g", 9)
			for _, cl := range []*client{a, b} {
				cl.rebalance = 300 * time.Millisecond
			}
			stableGroup(t, a, b)
			stayer, laggard := a, b
			if !leaderStays {
				stayer, laggard = b, a
			}
			n := newClient(t, c, "g", 9)
			n.rebalance = 300 * time.Millisecond
			start := time.Now()
			nj := async(func() *kmsg.JoinGroupResponse { return n.join(bg) })
			waitFor(t, 5*time.Second, "n parked", func() bool { return parked(c, "g") == 1 })
			sj := async(func() *kmsg.JoinGroupResponse { return stayer.join(bg) })
			// The laggard hears of the rebalance but does not rejoin.
			wantCode(t, "laggard heartbeat", laggard.heartbeat(), wantRebalanceInProgress)
			notYet(t, sj, 100*time.Millisecond)
			sr := recv(t, sj, 5*time.Second)
			nr := recv(t, nj, 5*time.Second)
			if el := time.Since(start); el < 250*time.Millisecond {
				t.Fatalf("join phase ended after %v, timeout 300ms", el)
			}
			wantCode(t, "stayer", sr.ErrorCode, wantNone)
			wantCode(t, "new", nr.ErrorCode, wantNone)
			if sr.Generation != 3 || sr.LeaderID != stayer.id || nr.LeaderID != stayer.id {
				t.Fatalf("generation %d leader %q/%q, want %q", sr.Generation, sr.LeaderID, nr.LeaderID, stayer.id)
			}
			if d := describe(t, c, "g"); slices.Contains(d.members, laggard.id) || len(d.members) != 2 {
				t.Fatalf("laggard still in %+v", d)
			}
			wantCode(t, "laggard heartbeat", laggard.heartbeat(), wantUnknownMember)
			syncAll(t, stayer, n)
			checkGroup(t, c, "g")
		})
	}
}

// TestSyncTimeout: a leader that never sends SyncGroup is removed after the
// rebalance timeout, and the follower waiting on it is told to rejoin.
func TestSyncTimeout(t *testing.T) {
	t.Parallel()
	c := newTestCoordinator(t, testOpts())
	a := newClient(t, c, "g", 9)
	b := newClient(t, c, "g", 9)
	stableGroup(t, a)
	a.rebalance, b.rebalance = 300*time.Millisecond, 300*time.Millisecond
	bj := async(func() *kmsg.JoinGroupResponse { return b.join(bg) })
	waitFor(t, 5*time.Second, "b parked", func() bool { return parked(c, "g") == 1 })
	a.mustJoin(bg)
	wantCode(t, "b join", recv(t, bj, 5*time.Second).ErrorCode, wantNone)
	start := time.Now()
	bs := async(func() *kmsg.SyncGroupResponse { return b.sync(bg, nil) })
	notYet(t, bs, 100*time.Millisecond)
	// The leader keeps heartbeating: that alone does not keep it.
	wantCode(t, "a heartbeat", a.heartbeat(), wantNone)
	wantCode(t, "b sync", recv(t, bs, 5*time.Second).ErrorCode, wantRebalanceInProgress)
	if el := time.Since(start); el < 150*time.Millisecond {
		t.Fatalf("sync expired after %v", el)
	}
	if d := describe(t, c, "g"); d.state != "PreparingRebalance" || !slices.Equal(d.members, []string{b.id}) {
		t.Fatalf("%+v", d)
	}
	wantCode(t, "a heartbeat", a.heartbeat(), wantUnknownMember)
	checkGroup(t, c, "g")
}

// TestStaticReplacement: a restarted static member takes over its instance
// id under a new member id; the old id is fenced everywhere.
func TestStaticReplacement(t *testing.T) {
	t.Parallel()
	t.Run("follower, unchanged", func(t *testing.T) {
		c := newTestCoordinator(t, testOpts())
		a := newClient(t, c, "g", 9)
		s := newClient(t, c, "g", 9).static("s")
		stableGroup(t, a, s)
		gen := s.gen
		s2 := newClient(t, c, "g", 9).static("s")
		resp := s2.joinOnce(bg)
		wantCode(t, "replacement join", resp.ErrorCode, wantNone)
		if resp.Generation != gen || resp.MemberID == s.id || !strings.HasPrefix(resp.MemberID, "s-") {
			t.Fatalf("generation %d (was %d), member %q (was %q)", resp.Generation, gen, resp.MemberID, s.id)
		}
		if resp.LeaderID != a.id || len(resp.Members) != 0 || resp.SkipAssignment {
			t.Fatalf("follower replacement: leader %q members %d skip %v", resp.LeaderID, len(resp.Members), resp.SkipAssignment)
		}
		if d := describe(t, c, "g"); d.state != "Stable" || d.gen != gen || !slices.Contains(d.members, s2.id) || slices.Contains(d.members, s.id) {
			t.Fatalf("%+v", d)
		}
		sr := s2.sync(bg, nil)
		wantCode(t, "replacement sync", sr.ErrorCode, wantNone)
		if string(sr.MemberAssignment) != "assigned:"+s.id {
			t.Fatalf("replacement got %q, want the old member's assignment", sr.MemberAssignment)
		}
		wantCode(t, "a heartbeat", a.heartbeat(), wantNone)
		wantCode(t, "s2 heartbeat", s2.heartbeat(), wantNone)

		wantCode(t, "old heartbeat", s.heartbeat(), wantFencedInstance)
		wantCode(t, "old sync", s.sync(bg, nil).ErrorCode, wantFencedInstance)
		wantErrCode(t, "old commit", s.commit(false), wantFencedInstance)
		wantErrCode(t, "old txn commit", s.commit(true), wantFencedInstance)
		old := *s
		wantCode(t, "old rejoin", old.joinOnce(bg).ErrorCode, wantFencedInstance)
		wantCode(t, "old leave", s.leave(), wantFencedInstance)
		if d := describe(t, c, "g"); d.state != "Stable" || d.gen != gen {
			t.Fatalf("fenced calls changed the group: %+v", d)
		}
		checkGroup(t, c, "g")
	})
	for _, v := range []int16{8, 9} {
		t.Run(fmt.Sprintf("leader v%d", v), func(t *testing.T) {
			c := newTestCoordinator(t, testOpts())
			l := newClient(t, c, "g", v).static("l")
			f := newClient(t, c, "g", v)
			stableGroup(t, l, f)
			gen := l.gen
			l2 := newClient(t, c, "g", v).static("l")
			resp := l2.joinOnce(bg)
			wantCode(t, "replacement join", resp.ErrorCode, wantNone)
			if resp.Generation != gen {
				t.Fatalf("generation %d, was %d", resp.Generation, gen)
			}
			if v >= 9 {
				// KIP-814: the new leader learns the members but keeps
				// the current assignment.
				if resp.LeaderID != l2.id || !resp.SkipAssignment || len(resp.Members) != 2 {
					t.Fatalf("leader %q skip %v members %d", resp.LeaderID, resp.SkipAssignment, len(resp.Members))
				}
			} else if resp.LeaderID != l.id || len(resp.Members) != 0 {
				// Before v9 Kafka names the old leader so the member
				// syncs as a follower.
				t.Fatalf("leader %q members %d, want old leader %q", resp.LeaderID, len(resp.Members), l.id)
			}
			sr := l2.sync(bg, map[string]string{l2.id: "ignored"})
			wantCode(t, "sync", sr.ErrorCode, wantNone)
			if string(sr.MemberAssignment) != "assigned:"+l.id {
				t.Fatalf("stable sync gave %q", sr.MemberAssignment)
			}
			wantCode(t, "follower heartbeat", f.heartbeat(), wantNone)
			// The group's leader is the new id: its rejoin rebalances.
			l2j := async(func() *kmsg.JoinGroupResponse { return l2.join(bg) })
			waitFor(t, 5*time.Second, "l2 parked", func() bool { return parked(c, "g") == 1 })
			wantCode(t, "follower heartbeat", f.heartbeat(), wantRebalanceInProgress)
			f.mustJoin(bg)
			if r := recv(t, l2j, 5*time.Second); r.ErrorCode != wantNone || r.Generation != gen+1 || r.LeaderID != l2.id {
				t.Fatalf("rejoin: %+v", r)
			}
			checkGroup(t, c, "g")
		})
	}
	t.Run("changed metadata rebalances", func(t *testing.T) {
		c := newTestCoordinator(t, testOpts())
		a := newClient(t, c, "g", 9)
		s := newClient(t, c, "g", 9).static("s")
		stableGroup(t, a, s)
		gen := a.gen
		s2 := newClient(t, c, "g", 9).static("s")
		s2.protocols = []proto{{"range", "topics:a,b"}}
		sj := async(func() *kmsg.JoinGroupResponse { return s2.joinOnce(bg) })
		waitFor(t, 5*time.Second, "s2 parked", func() bool { return parked(c, "g") == 1 })
		wantCode(t, "old heartbeat", s.heartbeat(), wantFencedInstance)
		wantCode(t, "a heartbeat", a.heartbeat(), wantRebalanceInProgress)
		ar := a.mustJoin(bg)
		sr := recv(t, sj, 5*time.Second)
		wantCode(t, "s2 join", sr.ErrorCode, wantNone)
		if ar.Generation != gen+1 || sr.Generation != gen+1 {
			t.Fatalf("generations %d/%d, want %d", ar.Generation, sr.Generation, gen+1)
		}
		for _, m := range ar.Members {
			if m.MemberID == s2.id && (m.InstanceID == nil || *m.InstanceID != "s" || string(m.ProtocolMetadata) != "topics:a,b") {
				t.Fatalf("leader sees %+v", m)
			}
		}
		syncAll(t, a, s2)
		checkGroup(t, c, "g")
	})
	t.Run("parked old member is fenced", func(t *testing.T) {
		c := newTestCoordinator(t, testOpts())
		a := newClient(t, c, "g", 9)
		s := newClient(t, c, "g", 9).static("s")
		stableGroup(t, a, s)
		n := newClient(t, c, "g", 9)
		nj := async(func() *kmsg.JoinGroupResponse { return n.join(bg) })
		waitFor(t, 5*time.Second, "n parked", func() bool { return parked(c, "g") == 1 })
		oldID := s.id
		sj := async(func() *kmsg.JoinGroupResponse { return s.joinOnce(bg) })
		waitFor(t, 5*time.Second, "s parked", func() bool { return parked(c, "g") == 2 })
		s2 := newClient(t, c, "g", 9).static("s")
		s2j := async(func() *kmsg.JoinGroupResponse { return s2.joinOnce(bg) })
		or := recv(t, sj, 5*time.Second)
		wantCode(t, "old parked join", or.ErrorCode, wantFencedInstance)
		if or.MemberID != oldID {
			t.Fatalf("fenced response names %q, want %q", or.MemberID, oldID)
		}
		a.mustJoin(bg)
		wantCode(t, "n", recv(t, nj, 5*time.Second).ErrorCode, wantNone)
		wantCode(t, "s2", recv(t, s2j, 5*time.Second).ErrorCode, wantNone)
		syncAll(t, a, n, s2)
		checkGroup(t, c, "g")
	})
	t.Run("static member skips MEMBER_ID_REQUIRED", func(t *testing.T) {
		c := newTestCoordinator(t, testOpts())
		s := newClient(t, c, "g", 9).static("s")
		wantCode(t, "first join", s.joinOnce(bg).ErrorCode, wantNone)
	})
}

func TestLeaveGroup(t *testing.T) {
	t.Parallel()
	t.Run("v1 single", func(t *testing.T) {
		c := newTestCoordinator(t, testOpts())
		a := newClient(t, c, "g", 1)
		b := newClient(t, c, "g", 1)
		stableGroup(t, a, b)
		wantCode(t, "b leave", b.leave(), wantNone)
		wantCode(t, "a heartbeat", a.heartbeat(), wantRebalanceInProgress)
		resp := a.mustJoin(bg)
		if resp.Generation != 3 || len(resp.Members) != 1 {
			t.Fatalf("generation %d members %d", resp.Generation, len(resp.Members))
		}
		wantCode(t, "leave again", b.leave(), wantUnknownMember)
		wantCode(t, "a leave", a.leave(), wantNone)
		// The last member leaving completes a join phase with nobody.
		if d := describe(t, c, "g"); d.state != "Empty" || d.gen != 4 || d.protocol != "" || len(d.members) != 0 {
			t.Fatalf("%+v", d)
		}
		u := newClient(t, c, "u", 1)
		u.id = "x"
		wantCode(t, "unknown group", u.leave(), wantUnknownMember)
		checkGroup(t, c, "g")
	})
	t.Run("v5 batch", func(t *testing.T) {
		c := newTestCoordinator(t, testOpts())
		a := newClient(t, c, "g", 9)
		s := newClient(t, c, "g", 9).static("s")
		tt := newClient(t, c, "g", 9).static("t")
		stableGroup(t, a, s, tt)
		p := newClient(t, c, "g", 9)
		wantCode(t, "pending", p.joinOnce(bg).ErrorCode, wantMemberIDRequired)
		str := func(s string) *string { return &s }
		req := kmsg.NewPtrLeaveGroupRequest()
		req.Version, req.Group = 5, "g"
		for _, m := range []struct {
			id   string
			inst *string
		}{{a.id, nil}, {"nobody", nil}, {"", str("s")}, {"wrong", str("t")}, {"", str("ghost")}, {p.id, nil}, {"", nil}} {
			lm := kmsg.NewLeaveGroupRequestMember()
			lm.MemberID, lm.InstanceID = m.id, m.inst
			req.Members = append(req.Members, lm)
		}
		resp := roundTrip(t, c.LeaveGroup(roundTrip(t, req, kmsg.NewPtrLeaveGroupRequest())), kmsg.NewPtrLeaveGroupResponse())
		wantCode(t, "top level", resp.ErrorCode, wantNone)
		want := []int16{wantNone, wantUnknownMember, wantNone, wantFencedInstance, wantUnknownMember, wantNone, wantUnknownMember}
		if len(resp.Members) != len(want) {
			t.Fatalf("%d member responses", len(resp.Members))
		}
		for i, m := range resp.Members {
			if m.ErrorCode != want[i] || m.MemberID != req.Members[i].MemberID {
				t.Errorf("member %d: %q code %d, want %q code %d", i, m.MemberID, m.ErrorCode, req.Members[i].MemberID, want[i])
			}
		}
		if d := describe(t, c, "g"); d.state != "PreparingRebalance" || !slices.Equal(d.members, []string{tt.id}) {
			t.Fatalf("%+v", d)
		}
		wantCode(t, "t heartbeat", tt.heartbeat(), wantRebalanceInProgress)
		wantCode(t, "p rejoin", p.joinOnce(bg).ErrorCode, wantUnknownMember)
		checkGroup(t, c, "g")
	})
	t.Run("parked joiner leaves", func(t *testing.T) {
		c := newTestCoordinator(t, testOpts())
		a := newClient(t, c, "g", 9)
		b := newClient(t, c, "g", 9)
		stableGroup(t, a, b)
		aj := async(func() *kmsg.JoinGroupResponse { return a.joinOnce(bg) })
		waitFor(t, 5*time.Second, "a parked", func() bool { return parked(c, "g") == 1 })
		// Another connection of a's client leaves for it.
		id := a.id
		req := kmsg.NewPtrLeaveGroupRequest()
		req.Version, req.Group, req.MemberID = 2, "g", id
		wantCode(t, "leave", c.LeaveGroup(req).ErrorCode, wantNone)
		wantCode(t, "parked join", recv(t, aj, 5*time.Second).ErrorCode, wantUnknownMember)
		// b is all that is left and must rejoin.
		wantCode(t, "b heartbeat", b.heartbeat(), wantRebalanceInProgress)
		if r := b.mustJoin(bg); len(r.Members) != 1 || r.LeaderID != b.id {
			t.Fatalf("%+v", r)
		}
		checkGroup(t, c, "g")
	})
	t.Run("empty group id", func(t *testing.T) {
		c := newTestCoordinator(t, testOpts())
		req := kmsg.NewPtrLeaveGroupRequest()
		req.Version = 5
		wantCode(t, "leave", c.LeaveGroup(req).ErrorCode, wantInvalidGroupID)
	})
}

func TestInconsistentProtocols(t *testing.T) {
	t.Parallel()
	c := newTestCoordinator(t, testOpts())
	a := newClient(t, c, "g", 9)
	stableGroup(t, a)
	for _, tc := range []struct {
		name   string
		edit   func(*client)
		member string
	}{
		{"other protocol type", func(cl *client) { cl.ptype = "connect" }, ""},
		{"no shared protocol", func(cl *client) { cl.protocols = []proto{{"roundrobin", ""}} }, ""},
		{"known member drops the shared protocol", func(cl *client) { *cl = *a; cl.protocols = []proto{{"roundrobin", ""}} }, a.id},
		{"known member changes protocol type", func(cl *client) { *cl = *a; cl.ptype = "connect" }, a.id},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := newClient(t, c, "g", 9)
			tc.edit(cl)
			resp := cl.joinOnce(bg)
			wantCode(t, "join", resp.ErrorCode, wantInconsistent)
			if resp.MemberID != tc.member {
				t.Fatalf("member id %q, want %q", resp.MemberID, tc.member)
			}
		})
	}
	if d := describe(t, c, "g"); d.state != "Stable" || d.gen != 1 || len(d.members) != 1 {
		t.Fatalf("rejected joins changed the group: %+v", d)
	}
	// A member that lists the group's protocol among others is welcome.
	b := newClient(t, c, "g", 9)
	b.protocols = []proto{{"roundrobin", ""}, {"range", "topics:a"}}
	bj := async(func() *kmsg.JoinGroupResponse { return b.join(bg) })
	waitFor(t, 5*time.Second, "b parked", func() bool { return parked(c, "g") == 1 })
	a.mustJoin(bg)
	if r := recv(t, bj, 5*time.Second); r.ErrorCode != wantNone || *r.Protocol != "range" {
		t.Fatalf("%+v", r)
	}
	// An Empty group takes a new protocol type.
	syncAll(t, a, b)
	a.leave()
	b.leave()
	x := newClient(t, c, "g", 9)
	x.ptype = "connect"
	wantCode(t, "join of emptied group", x.join(bg).ErrorCode, wantNone)
	checkGroup(t, c, "g")
}

// TestProtocolVote: the protocol is the one most members rank first among
// those every member supports; the leader gets each member's metadata for
// it.
func TestProtocolVote(t *testing.T) {
	t.Parallel()
	rr, rg, st := "roundrobin", "range", "sticky"
	for _, tc := range []struct {
		name    string
		members [][]string
		want    string
	}{
		{"majority", [][]string{{rg, rr}, {rr, rg}, {rr, rg}}, rr},
		{"only shared ones count", [][]string{{st, rg}, {rg, st}, {rg}}, rg},
		{"first choice outside the shared set falls through", [][]string{{st, rr, rg}, {rg, rr}, {rr, rg}}, rr},
		{"tie goes to the earliest member's vote", [][]string{{rr, rg}, {rg, rr}}, rr},
		{"tie, other order", [][]string{{rg, rr}, {rr, rg}}, rg},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestCoordinator(t, testOpts())
			var cls []*client
			for i, names := range tc.members {
				cl := newClient(t, c, "g", 9)
				cl.protocols = nil
				for _, n := range names {
					cl.protocols = append(cl.protocols, proto{n, fmt.Sprintf("%d:%s", i, n)})
				}
				cls = append(cls, cl)
			}
			stableGroup(t, cls...)
			for i, cl := range cls {
				if cl.proto != tc.want {
					t.Fatalf("member %d told %q, want %q", i, cl.proto, tc.want)
				}
			}
			// The later members join concurrently, in either order.
			index := make(map[string]int)
			for i, cl := range cls {
				index[cl.id] = i
			}
			leader := cls[0]
			if len(leader.members) != len(cls) {
				t.Fatalf("leader got %d members", len(leader.members))
			}
			for _, m := range leader.members {
				i := index[m.MemberID]
				if got, want := string(m.ProtocolMetadata), fmt.Sprintf("%d:%s", i, tc.want); got != want {
					t.Fatalf("member %d metadata %q, want %q", i, got, want)
				}
			}
			if d := describe(t, c, "g"); d.protocol != tc.want {
				t.Fatalf("described protocol %q", d.protocol)
			}
		})
	}
}

// TestRejoinRules: Kafka's answer to a JoinGroup of a known member depends
// on the state, on whether it leads, and on whether its metadata changed.
func TestRejoinRules(t *testing.T) {
	t.Parallel()
	c := newTestCoordinator(t, testOpts())
	a := newClient(t, c, "g", 9)
	b := newClient(t, c, "g", 9)
	stableGroup(t, a, b)
	gen := a.gen

	// A follower rejoining unchanged gets the current generation back.
	r := b.joinOnce(bg)
	if r.ErrorCode != wantNone || r.Generation != gen || r.LeaderID != a.id || len(r.Members) != 0 {
		t.Fatalf("follower rejoin: %+v", r)
	}
	if d := describe(t, c, "g"); d.state != "Stable" || d.gen != gen {
		t.Fatalf("%+v", d)
	}
	wantCode(t, "sync", b.sync(bg, nil).ErrorCode, wantNone)

	// The leader's unchanged rejoin rebalances.
	aj := async(func() *kmsg.JoinGroupResponse { return a.joinOnce(bg) })
	waitFor(t, 5*time.Second, "a parked", func() bool { return parked(c, "g") == 1 })
	wantCode(t, "b heartbeat", b.heartbeat(), wantRebalanceInProgress)
	b.mustJoin(bg)
	if r := recv(t, aj, 5*time.Second); r.Generation != gen+1 {
		t.Fatalf("leader rejoin: %+v", r)
	}
	gen++

	// In CompletingRebalance an unchanged rejoin (a lost response) is
	// answered again, with the member list for the leader.
	r = a.joinOnce(bg)
	if r.ErrorCode != wantNone || r.Generation != gen || len(r.Members) != 2 {
		t.Fatalf("leader re-asks while completing: %+v", r)
	}
	r = b.joinOnce(bg)
	if r.ErrorCode != wantNone || r.Generation != gen || len(r.Members) != 0 {
		t.Fatalf("follower re-asks while completing: %+v", r)
	}
	if d := describe(t, c, "g"); d.state != "CompletingRebalance" || d.gen != gen {
		t.Fatalf("%+v", d)
	}
	// A follower parked in SyncGroup is told to rejoin when another
	// member's metadata changes.
	bs := async(func() *kmsg.SyncGroupResponse { return b.sync(bg, nil) })
	waitFor(t, 5*time.Second, "b sync parked", func() bool { return parkedSyncs(c, "g") == 1 })
	a.protocols = []proto{{"range", "topics:a,b"}}
	aj = async(func() *kmsg.JoinGroupResponse { return a.joinOnce(bg) })
	wantCode(t, "b parked sync", recv(t, bs, 5*time.Second).ErrorCode, wantRebalanceInProgress)
	b.mustJoin(bg)
	if r := recv(t, aj, 5*time.Second); r.Generation != gen+1 {
		t.Fatalf("changed rejoin: %+v", r)
	}
	syncAll(t, a, b)
	checkGroup(t, c, "g")
}

// TestDuplicateJoin: a second JoinGroup of a parked member (its client
// retried on a new connection) supersedes the first.
func TestDuplicateJoin(t *testing.T) {
	t.Parallel()
	c := newTestCoordinator(t, testOpts())
	a := newClient(t, c, "g", 9)
	b := newClient(t, c, "g", 9)
	stableGroup(t, a, b)
	first := async(func() *kmsg.JoinGroupResponse { return a.joinOnce(bg) })
	waitFor(t, 5*time.Second, "a parked", func() bool { return parked(c, "g") == 1 })
	a2 := *a
	second := async(func() *kmsg.JoinGroupResponse { return a2.joinOnce(bg) })
	wantCode(t, "superseded join", recv(t, first, 5*time.Second).ErrorCode, wantRebalanceInProgress)
	b.mustJoin(bg)
	wantCode(t, "second join", recv(t, second, 5*time.Second).ErrorCode, wantNone)
	checkGroup(t, c, "g")
}

func TestDeleteGroup(t *testing.T) {
	t.Parallel()
	c := newTestCoordinator(t, testOpts())
	a := newClient(t, c, "g", 9)
	stableGroup(t, a)
	wantErrCode(t, "delete stable", c.DeleteGroup("g", true, nil), wantNonEmptyGroup)
	wantErrCode(t, "delete unknown", c.DeleteGroup("u", false, nil), wantGroupIDNotFound)
	if err := c.DeleteGroup("u", true, nil); err != nil {
		t.Fatalf("delete of an offsets-only group: %v", err)
	}
	// A pending member does not keep an Empty group alive.
	p := newClient(t, c, "p", 9)
	wantCode(t, "pending", p.joinOnce(bg).ErrorCode, wantMemberIDRequired)
	if err := c.DeleteGroup("p", false, nil); err != nil {
		t.Fatalf("delete with a pending member: %v", err)
	}
	wantCode(t, "pending rejoin", p.joinOnce(bg).ErrorCode, wantUnknownMember)

	wantCode(t, "leave", a.leave(), wantNone)
	if c.Groups() != 1 {
		t.Fatalf("%d groups", c.Groups())
	}
	if err := c.DeleteGroup("g", false, nil); err != nil {
		t.Fatalf("delete empty: %v", err)
	}
	if _, _, _, _, ok := c.Describe("g"); ok || c.Groups() != 0 {
		t.Fatal("deleted group still known")
	}
	wantErrCode(t, "delete twice", c.DeleteGroup("g", false, nil), wantGroupIDNotFound)
	// A new group of the same name starts over.
	b := newClient(t, c, "g", 9)
	if r := b.mustJoin(bg); r.Generation != 1 {
		t.Fatalf("generation %d", r.Generation)
	}
}

// TestContextCancel: a parked call returns promptly when its context is
// done, leaves no goroutine behind, and leaves the group consistent.
func TestContextCancel(t *testing.T) {
	noLeak(t)
	c := newTestCoordinator(t, testOpts())
	a := newClient(t, c, "g", 9)
	b := newClient(t, c, "g", 9)
	stableGroup(t, a, b)

	// A new member (v3, no member id round) abandons its join: it is
	// removed, so the rebalance does not wait for it.
	n := newClient(t, c, "g", 3)
	ctx, cancel := context.WithCancel(bg)
	nj := async(func() *kmsg.JoinGroupResponse { return n.join(ctx) })
	waitFor(t, 5*time.Second, "n parked", func() bool { return parked(c, "g") == 1 })
	cancel()
	start := time.Now()
	wantCode(t, "abandoned join", recv(t, nj, time.Second).ErrorCode, wantCoordNotAvailable)
	if el := time.Since(start); el > 500*time.Millisecond {
		t.Fatalf("cancelled join returned after %v", el)
	}
	if d := describe(t, c, "g"); len(d.members) != 2 {
		t.Fatalf("abandoned new member kept: %+v", d)
	}
	checkGroup(t, c, "g")

	// A known member abandons its join: it stays a member.
	ctx, cancel = context.WithCancel(bg)
	aj := async(func() *kmsg.JoinGroupResponse { return a.joinOnce(ctx) })
	waitFor(t, 5*time.Second, "a parked", func() bool { return parked(c, "g") == 1 })
	cancel()
	wantCode(t, "abandoned rejoin", recv(t, aj, time.Second).ErrorCode, wantCoordNotAvailable)
	if d := describe(t, c, "g"); !slices.Contains(d.members, a.id) || d.state != "PreparingRebalance" {
		t.Fatalf("%+v", d)
	}
	checkGroup(t, c, "g")
	// Its client retries and the rebalance goes on.
	aj = async(func() *kmsg.JoinGroupResponse { return a.joinOnce(bg) })
	b.mustJoin(bg)
	wantCode(t, "retried join", recv(t, aj, 5*time.Second).ErrorCode, wantNone)

	// A follower abandons its parked sync; the member stays.
	ctx, cancel = context.WithCancel(bg)
	bs := async(func() *kmsg.SyncGroupResponse { return b.sync(ctx, nil) })
	waitFor(t, 5*time.Second, "b sync parked", func() bool { return parkedSyncs(c, "g") == 1 })
	cancel()
	wantCode(t, "abandoned sync", recv(t, bs, time.Second).ErrorCode, wantCoordNotAvailable)
	if parkedSyncs(c, "g") != 0 {
		t.Fatal("abandoned sync still parked")
	}
	syncAll(t, a, b)
	checkGroup(t, c, "g")
}

// TestClose: Close answers parked calls and every later call with
// COORDINATOR_NOT_AVAILABLE.
func TestClose(t *testing.T) {
	t.Parallel()
	noLeak(t)
	c := New(testOpts())
	a := newClient(t, c, "g", 9)
	b := newClient(t, c, "g", 9)
	stableGroup(t, a)
	bj := async(func() *kmsg.JoinGroupResponse { return b.join(bg) })
	waitFor(t, 5*time.Second, "b parked", func() bool { return parked(c, "g") == 1 })
	x := newClient(t, c, "h", 9)
	y := newClient(t, c, "h", 9)
	stableGroup(t, x)
	yj := async(func() *kmsg.JoinGroupResponse { return y.join(bg) })
	waitFor(t, 5*time.Second, "y parked", func() bool { return parked(c, "h") == 1 })
	x.mustJoin(bg)
	recv(t, yj, 5*time.Second)
	ys := async(func() *kmsg.SyncGroupResponse { return y.sync(bg, nil) })
	waitFor(t, 5*time.Second, "y sync parked", func() bool { return parkedSyncs(c, "h") == 1 })

	c.Close()
	wantCode(t, "parked join", recv(t, bj, time.Second).ErrorCode, wantCoordNotAvailable)
	wantCode(t, "parked sync", recv(t, ys, time.Second).ErrorCode, wantCoordNotAvailable)
	c.Close() // idempotent

	wantCode(t, "join", newClient(t, c, "g", 9).joinOnce(bg).ErrorCode, wantCoordNotAvailable)
	wantCode(t, "sync", x.sync(bg, nil).ErrorCode, wantCoordNotAvailable)
	wantCode(t, "heartbeat", a.heartbeat(), wantCoordNotAvailable)
	wantErrCode(t, "commit", a.commit(false), wantCoordNotAvailable)
	wantErrCode(t, "delete", c.DeleteGroup("g", true, nil), wantCoordNotAvailable)
	wantCode(t, "leave", a.leave(), wantCoordNotAvailable)
	if c.Groups() != 2 {
		t.Fatalf("%d groups", c.Groups())
	}
}

// TestInitialRebalanceDelay: members joining an Empty group within the
// delay form the first generation together.
func TestInitialRebalanceDelay(t *testing.T) {
	const delay = 500 * time.Millisecond
	opts := testOpts()
	opts.InitialRebalanceDelay = delay
	c := newTestCoordinator(t, opts)
	a := newClient(t, c, "g", 3)
	b := newClient(t, c, "g", 3)
	start := time.Now()
	aj := async(func() *kmsg.JoinGroupResponse { return a.join(bg) })
	waitFor(t, 5*time.Second, "a parked", func() bool { return parked(c, "g") == 1 })
	bj := async(func() *kmsg.JoinGroupResponse { return b.join(bg) })
	ar, br := recv(t, aj, 5*time.Second), recv(t, bj, 5*time.Second)
	// b joined within the delay, which extends it by another delay.
	if el := time.Since(start); el < 2*delay {
		t.Fatalf("first generation after %v", el)
	}
	if ar.Generation != 1 || br.Generation != 1 || len(ar.Members) != 2 || ar.LeaderID != a.id {
		t.Fatalf("a %+v\nb %+v", ar, br)
	}
	syncAll(t, a, b)
	// The delay only holds an Empty group: later rebalances do not wait.
	n := newClient(t, c, "g", 3)
	nj := async(func() *kmsg.JoinGroupResponse { return n.join(bg) })
	waitFor(t, 5*time.Second, "n parked", func() bool { return parked(c, "g") == 1 })
	start = time.Now()
	jb := async(func() *kmsg.JoinGroupResponse { return b.join(bg) })
	a.mustJoin(bg)
	recv(t, jb, 5*time.Second)
	recv(t, nj, 5*time.Second)
	if el := time.Since(start); el >= delay {
		t.Fatalf("second rebalance took %v", el)
	}
}

func TestNewJoinReq(t *testing.T) {
	t.Parallel()
	inst := "i"
	req := kmsg.NewPtrJoinGroupRequest()
	req.SessionTimeoutMillis = 7000
	req.RebalanceTimeoutMillis = 60000
	req.InstanceID = &inst
	req.Protocols = protos(proto{"a", "1"}, proto{"b", "2"}, proto{"a", "3"})
	for _, tc := range []struct {
		version   int16
		rebalance int32
		want      time.Duration
		instance  bool
	}{
		{0, 60000, 7 * time.Second, false}, // v0 has no rebalance timeout
		{1, 60000, time.Minute, false},
		{1, -1, 7 * time.Second, false},
		{4, 60000, time.Minute, false},
		{5, 60000, time.Minute, true},
	} {
		req.Version, req.RebalanceTimeoutMillis = tc.version, tc.rebalance
		jr := newJoinReq(WithClientID(bg, "cid"), req)
		if jr.rebalance != tc.want || jr.session != 7*time.Second || (jr.instanceID != nil) != tc.instance || jr.clientID != "cid" {
			t.Fatalf("v%d: %+v", tc.version, jr)
		}
		if len(jr.protocols) != 2 || jr.protocols[0].Name != "a" || string(jr.protocols[0].Metadata) != "1" || jr.protocols[1].Name != "b" {
			t.Fatalf("v%d protocols %+v", tc.version, jr.protocols)
		}
		// The coordinator keeps copies, not the caller's buffer.
		req.Protocols[0].Metadata[0] = 'X'
		if string(jr.protocols[0].Metadata) != "1" {
			t.Fatal("metadata aliases the request")
		}
		req.Protocols[0].Metadata[0] = '1'
	}
}

// TestStaticMemberOutlivesJoinTimeout: unlike a dynamic member, a static
// member that misses a join phase stays in the group (Kafka keeps it for
// its session); it catches up by rejoining the generation it missed.
func TestStaticMemberOutlivesJoinTimeout(t *testing.T) {
	t.Parallel()
	c := newTestCoordinator(t, testOpts())
	a := newClient(t, c, "g", 9)
	s := newClient(t, c, "g", 9).static("s")
	n := newClient(t, c, "g", 9)
	for _, cl := range []*client{a, s, n} {
		cl.rebalance = 200 * time.Millisecond
	}
	stableGroup(t, a, s)
	nj := async(func() *kmsg.JoinGroupResponse { return n.join(bg) })
	waitFor(t, 5*time.Second, "n parked", func() bool { return parked(c, "g") == 1 })
	wantCode(t, "s heartbeat", s.heartbeat(), wantRebalanceInProgress)
	ar := a.mustJoin(bg) // returns at the rebalance timeout: s did not rejoin
	wantCode(t, "n join", recv(t, nj, 5*time.Second).ErrorCode, wantNone)
	if len(ar.Members) != 3 {
		t.Fatalf("leader got %d members, want a, s and n", len(ar.Members))
	}
	wantCode(t, "s heartbeat of the old generation", s.heartbeat(), wantIllegalGeneration)
	// Its unchanged rejoin is answered with the generation it missed.
	r := s.joinOnce(bg)
	if r.ErrorCode != wantNone || r.Generation != ar.Generation || len(r.Members) != 0 {
		t.Fatalf("s rejoin: %+v", r)
	}
	syncAll(t, a, s, n)
	checkGroup(t, c, "g")
}

// TestRequestBytesCopied: the listener reuses its read buffer, so nothing
// the coordinator keeps may alias a request.
func TestRequestBytesCopied(t *testing.T) {
	t.Parallel()
	c := newTestCoordinator(t, testOpts())
	a := newClient(t, c, "g", 9)
	b := newClient(t, c, "g", 9)
	stableGroup(t, a)
	bj := async(func() *kmsg.JoinGroupResponse { return b.join(bg) })
	waitFor(t, 5*time.Second, "b parked", func() bool { return parked(c, "g") == 1 })
	a.mustJoin(bg)
	recv(t, bj, 5*time.Second)
	bs := async(func() *kmsg.SyncGroupResponse { return b.sync(bg, nil) })
	req := a.syncRequest(map[string]string{a.id: "AAAA", b.id: "BBBB"})
	wantCode(t, "a sync", c.SyncGroup(bg, req).ErrorCode, wantNone)
	if got := string(recv(t, bs, 5*time.Second).MemberAssignment); got != "BBBB" {
		t.Fatalf("b got %q", got)
	}
	for _, ga := range req.GroupAssignment {
		copy(ga.MemberAssignment, "XXXX")
	}
	if got := string(b.sync(bg, nil).MemberAssignment); got != "BBBB" {
		t.Fatalf("stored assignment changed with the request buffer: %q", got)
	}
}
