package bench

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// While the gate is closed no participant gets past wait; close returns
// only once each has reached it (or left), so that a slice's counters
// stop moving when it returns.
func TestGateHoldsParticipants(t *testing.T) {
	const n = 4
	g := newGate(n)
	var stop atomic.Bool
	var passed [n]atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			defer g.leave()
			for !stop.Load() {
				g.wait()
				time.Sleep(100 * time.Microsecond) // the batch in hand
				passed[i].Add(1)
			}
		})
	}
	sum := func() (s int64) {
		for i := range passed {
			s += passed[i].Load()
		}
		return s
	}
	for range 20 {
		time.Sleep(2 * time.Millisecond)
		g.close()
		held := sum()
		time.Sleep(3 * time.Millisecond)
		if now := sum(); now != held {
			t.Fatalf("participants passed a closed gate: %d then %d", held, now)
		}
		g.open()
	}
	time.Sleep(2 * time.Millisecond)
	before := sum()
	time.Sleep(5 * time.Millisecond)
	if sum() == before {
		t.Errorf("participants did not go on after the gate opened")
	}
	stop.Store(true)
	wg.Wait()
	if !g.idle() {
		t.Errorf("gate not idle after every participant left")
	}
}

// A participant that leaves (a producer whose quota is written) is no
// longer waited for: close returns with the others parked.
func TestGateCloseAfterLeave(t *testing.T) {
	g := newGate(2)
	g.leave()
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() { // the remaining participant
		defer g.leave()
		for !stop.Load() {
			g.wait()
			time.Sleep(50 * time.Microsecond)
		}
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.close()
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("close waited for a participant that had left")
	}
	stop.Store(true)
	g.open()
	wg.Wait()
}
