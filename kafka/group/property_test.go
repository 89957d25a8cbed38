package group

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestRandomSchedules drives simulated members through random joins,
// leaves, heartbeats, commits, metadata changes, static restarts and
// silences, concurrently, and checks:
//
//   - no JoinGroup returns, and no heartbeat or commit is accepted for a generation older than one a
//     JoinGroup had already returned before the call started (so two members
//     of different generations are never both accepted as current);
//   - the generation never decreases;
//   - the group's bookkeeping holds after every step (checkInvariants);
//   - every call returns (no lost wake-up: each has a deadline);
//   - once the clients stop, the group drains to Empty.
func TestRandomSchedules(t *testing.T) {
	t.Parallel()
	noLeak(t)
	for seed := range uint64(2) {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) { runSchedule(t, seed, 1500*time.Millisecond) })
	}
}

type schedule struct {
	t       *testing.T
	c       *Coordinator
	maxGen  atomic.Int32 // highest generation a JoinGroup has returned
	stale   atomic.Int32 // accepted calls of a generation known to be old
	accepts atomic.Int32
	joins   atomic.Int32
}

func runSchedule(t *testing.T, seed uint64, length time.Duration) {
	s := &schedule{t: t, c: newTestCoordinator(t, testOpts())}
	ctx, cancel := context.WithTimeout(bg, length)
	defer cancel()

	var wg sync.WaitGroup
	versions := []int16{3, 4, 5, 9, 9, 7}
	clients := make([]*client, len(versions))
	for i, v := range versions {
		cl := newClient(t, s.c, "g", v)
		cl.session, cl.rebalance = 200*time.Millisecond, 200*time.Millisecond
		if v >= 5 && i%2 == 0 {
			cl.static(fmt.Sprintf("inst%d", i))
		}
		clients[i] = cl
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		wg.Go(func() { s.member(ctx, cl, rng) })
	}

	// The monitor checks the group as it changes.
	monitorDone := make(chan struct{})
	go func() {
		defer close(monitorDone)
		last := int32(0)
		for ctx.Err() == nil {
			if _, gen, _, _, ok := s.c.Describe("g"); ok {
				if gen < last {
					t.Errorf("generation went from %d to %d", last, gen)
				}
				last = gen
			}
			checkGroup(t, s.c, "g")
			time.Sleep(time.Millisecond)
		}
	}()
	wg.Wait()
	<-monitorDone

	if n := s.stale.Load(); n > 0 {
		t.Fatalf("%d calls accepted for a stale generation", n)
	}
	if s.joins.Load() < 10 || s.accepts.Load() < 20 {
		t.Fatalf("schedule too idle to mean anything: %d joins, %d accepted calls", s.joins.Load(), s.accepts.Load())
	}
	for _, cl := range clients {
		if cl.id != "" {
			cl.leave()
		}
	}
	// Members no client knows any more (a join abandoned at the end)
	// expire with their sessions.
	waitFor(t, 5*time.Second, "group empty", func() bool {
		st, _, _, ms, _ := s.c.Describe("g")
		return st == "Empty" && len(ms) == 0
	})
	checkGroup(t, s.c, "g")
	t.Logf("%d joins, %d accepted heartbeats and commits, final generation %d", s.joins.Load(), s.accepts.Load(), s.maxGen.Load())
}

func (s *schedule) raise(gen int32) {
	for {
		cur := s.maxGen.Load()
		if gen <= cur || s.maxGen.CompareAndSwap(cur, gen) {
			return
		}
	}
}

// accepted records a call the coordinator accepted at cl.gen; seen is the
// highest generation returned by a JoinGroup before the call started.
func (s *schedule) accepted(cl *client, seen int32, what string) {
	s.accepts.Add(1)
	if cl.gen < seen {
		s.stale.Add(1)
		s.t.Errorf("%s accepted at generation %d after generation %d was handed out", what, cl.gen, seen)
	}
}

// member is one simulated client: it keeps itself in the group, like a
// consumer's heartbeat loop, while the rng picks disruptions.
func (s *schedule) member(ctx context.Context, cl *client, rng *rand.Rand) {
	rejoin := true
	for ctx.Err() == nil {
		if rejoin {
			rejoin = !s.joinAndSync(ctx, cl)
			if rejoin {
				time.Sleep(time.Duration(rng.IntN(5)) * time.Millisecond)
				continue
			}
		}
		switch op := rng.IntN(100); {
		case op < 70:
			seen := s.maxGen.Load()
			switch code := cl.heartbeat(); code {
			case wantNone:
				s.accepted(cl, seen, "heartbeat")
			case wantRebalanceInProgress, wantIllegalGeneration:
				rejoin = true
			case wantUnknownMember, wantFencedInstance:
				cl.id, rejoin = "", true
			default:
				s.t.Errorf("heartbeat: code %d", code)
			}
		case op < 85:
			seen := s.maxGen.Load()
			if err := cl.commit(rng.IntN(2) == 0); err == nil {
				s.accepted(cl, seen, "commit")
			}
		case op < 88:
			cl.leave()
			rejoin = true
		case op < 91:
			cl.protocols = []proto{{"range", fmt.Sprintf("topics:%d", rng.IntN(3))}}
			rejoin = true
		case op < 92:
			// Silence past the session timeout: the member is evicted.
			time.Sleep(250 * time.Millisecond)
		case op < 94:
			if cl.instance != nil {
				// A restart of a static member: same instance, no id.
				cl.id = ""
			}
			rejoin = true
		}
		time.Sleep(time.Duration(5+rng.IntN(10)) * time.Millisecond)
	}
}

// joinAndSync runs one join and sync round; false means rejoin.
func (s *schedule) joinAndSync(ctx context.Context, cl *client) bool {
	callCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	seen := s.maxGen.Load()
	resp := cl.join(callCtx)
	if resp.ErrorCode != wantNone {
		if resp.ErrorCode == wantCoordNotAvailable && ctx.Err() == nil {
			s.t.Errorf("join timed out: a parked JoinGroup was never answered")
		}
		return false
	}
	// A join answers the current generation (a new one, or the same one
	// again for an unchanged member), never one older than a join
	// already returned.
	if resp.Generation < seen {
		s.t.Errorf("join returned generation %d after generation %d was handed out", resp.Generation, seen)
	}
	s.joins.Add(1)
	s.raise(resp.Generation)
	var plan map[string]string
	if cl.isLeader() && !cl.skip {
		plan = make(map[string]string)
		for _, m := range cl.members {
			plan[m.MemberID] = "assigned:" + m.MemberID
		}
	}
	sr := cl.sync(callCtx, plan)
	switch sr.ErrorCode {
	case wantNone:
		return true
	case wantUnknownMember, wantFencedInstance:
		cl.id = ""
	case wantCoordNotAvailable:
		if ctx.Err() == nil {
			s.t.Errorf("sync timed out: a parked SyncGroup was never answered")
		}
	}
	return false
}
