package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// memberDeadlineLeft reads how long a member's session has left.
func memberDeadlineLeft(c *Coordinator, name, id string) (time.Duration, bool) {
	g := c.locked(name, false)
	if g == nil {
		return 0, false
	}
	defer g.mu.Unlock()
	m := g.members[id]
	if m == nil {
		return 0, false
	}
	return time.Until(m.deadline), true
}

// TestSyncErrorRefreshesSession: when a rebalance voids a parked
// SyncGroup (REBALANCE_IN_PROGRESS), Kafka's propagateAssignment reschedules
// the member's heartbeat (GroupCoordinator.propagateAssignment /
// GroupMetadataManager.propagateAssignment: "reset the session timeout for
// members after propagating"), so the member has a full session to rejoin.
// Here the member keeps whatever was left of a session that ran while it
// was parked, and is evicted before it can rejoin.
func TestSyncErrorRefreshesSession(t *testing.T) {
	t.Parallel()
	c := newTestCoordinator(t, testOpts())
	a := newClient(t, c, "g", 9)
	b := newClient(t, c, "g", 9)
	for _, cl := range []*client{a, b} {
		cl.session, cl.rebalance = 300*time.Millisecond, 5*time.Second
	}
	stableGroup(t, a)
	bj := async(func() *kmsg.JoinGroupResponse { return b.join(bg) })
	waitFor(t, 5*time.Second, "b parked", func() bool { return parked(c, "g") == 1 })
	a.mustJoin(bg)
	wantCode(t, "b join", recv(t, bj, 5*time.Second).ErrorCode, wantNone)

	// b syncs and waits for the leader, which is slow to assign.
	bs := async(func() *kmsg.SyncGroupResponse { return b.sync(bg, nil) })
	waitFor(t, 5*time.Second, "b sync parked", func() bool { return parkedSyncs(c, "g") == 1 })
	// Wait (a heartbeating) until b's session, refreshed only by the
	// parked-call rule, is about to run out.
	deadline := time.Now().Add(5 * time.Second)
	for {
		wantCode(t, "a heartbeat", a.heartbeat(), wantNone)
		left, ok := memberDeadlineLeft(c, "g", b.id)
		if !ok {
			t.Fatal("b gone while parked in sync")
		}
		if left > 5*time.Millisecond && left < 40*time.Millisecond {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("never found b near its session deadline")
		}
		time.Sleep(2 * time.Millisecond)
	}
	// The leader rejoins with new metadata: the generation's sync is void.
	a.protocols = []proto{{"range", "topics:a,b"}}
	aj := async(func() *kmsg.JoinGroupResponse { return a.join(bg) })
	wantCode(t, "b sync", recv(t, bs, 5*time.Second).ErrorCode, wantRebalanceInProgress)
	// The client takes a moment (well within its 300ms session) to rejoin.
	time.Sleep(80 * time.Millisecond)
	br := b.joinOnce(bg)
	if br.ErrorCode != wantNone {
		t.Fatalf("b rejoined 80ms after its sync was voided (session timeout 300ms): code %d, want 0 (Kafka resets the session when it answers the parked sync)", br.ErrorCode)
	}
	wantCode(t, "a join", recv(t, aj, 5*time.Second).ErrorCode, wantNone)
}

// TestEmptyGroupsNeverForgotten: Kafka's periodic
// offsets cleanup removes an Empty group with no offsets; here nothing did,
// so each distinct group id a client joined once (kafka-console-consumer's
// random "console-consumer-NNNNN", or a JoinGroup that only got
// MEMBER_ID_REQUIRED) cost memory for the life of the process.
// ForgetEmptyGroups, which the listener's maintenance tick runs, removes
// them, and keeps groups with offsets or members.
func TestEmptyGroupsNeverForgotten(t *testing.T) {
	t.Parallel()
	c := newTestCoordinator(t, testOpts())
	const n = 200
	for i := range n {
		cl := newClient(t, c, "console-consumer-"+string(rune('A'+i%26))+string(rune('a'+i/26)), 4)
		cl.session = 5 * time.Millisecond
		// Only the MEMBER_ID_REQUIRED round: the client went away.
		wantCode(t, "first join", cl.joinOnce(bg).ErrorCode, wantMemberIDRequired)
	}
	time.Sleep(300 * time.Millisecond) // every pending id has expired
	withOffsets := "console-consumer-Aa"
	removed := c.ForgetEmptyGroups(func(g string) bool { return g == withOffsets })
	if removed != n-1 || c.Groups() != 1 {
		t.Fatalf("ForgetEmptyGroups removed %d, %d left; want %d removed and the group with offsets kept", removed, c.Groups(), n-1)
	}
	if removed := c.ForgetEmptyGroups(func(string) bool { return false }); removed != 1 || c.Groups() != 0 {
		t.Fatalf("second sweep removed %d, %d left", removed, c.Groups())
	}
}
