package group

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestPendingExpiryEndsInitialDelay: InitialRebalanceDelay holds the
// first join phase of an Empty group open (Kafka's InitialDelayedJoin,
// whose tryComplete is false: only its timer completes it; Kafka's
// maybeCompleteJoinPhase requires previousState != EMPTY). A pending member
// (MEMBER_ID_REQUIRED, never rejoined) whose session runs out completes the
// join phase at once here (group.go addPending's timer calls completeJoin
// without that check), cutting the delay short.
func TestPendingExpiryEndsInitialDelay(t *testing.T) {
	t.Parallel()
	opts := testOpts()
	opts.InitialRebalanceDelay = 3 * time.Second
	c := newTestCoordinator(t, opts)
	a := newClient(t, c, "g", 4)
	b := newClient(t, c, "g", 4)
	b.session = 20 * time.Millisecond
	aj := async(func() *kmsg.JoinGroupResponse { return a.join(bg) })
	waitFor(t, 5*time.Second, "a parked", func() bool { return parked(c, "g") == 1 })
	// b gets its member id and goes away.
	wantCode(t, "b first join", b.joinOnce(bg).ErrorCode, wantMemberIDRequired)
	notYet(t, aj, time.Second)
}

// TestAbandonedNewJoinEndsInitialDelay: the same through
// afterRemoval: a new member whose parked join is abandoned is removed, and
// afterRemoval completes a PreparingRebalance whose members have all
// joined without regard to the initial delay.
func TestAbandonedNewJoinEndsInitialDelay(t *testing.T) {
	t.Parallel()
	opts := testOpts()
	opts.InitialRebalanceDelay = 3 * time.Second
	c := newTestCoordinator(t, opts)
	a := newClient(t, c, "g", 3)
	b := newClient(t, c, "g", 3)
	aj := async(func() *kmsg.JoinGroupResponse { return a.join(bg) })
	waitFor(t, 5*time.Second, "a parked", func() bool { return parked(c, "g") == 1 })
	ctx, cancel := context.WithCancel(bg)
	bj := async(func() *kmsg.JoinGroupResponse { return b.join(ctx) })
	waitFor(t, 5*time.Second, "b parked", func() bool { return parked(c, "g") == 2 })
	cancel()
	wantCode(t, "b abandoned join", recv(t, bj, 5*time.Second).ErrorCode, wantCoordNotAvailable)
	notYet(t, aj, time.Second)
}
