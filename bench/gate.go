package bench

import (
	"sync"
	"sync/atomic"
)

// gate pauses the producers and readers between the engine's slices of an
// interleaved run, so that the baseline's slices have the machine to
// themselves. A participant calls wait before each batch (or read): one
// atomic load while the gate is open, so that the append path takes no
// lock shared by producers; the mutex is taken only while closed.
type gate struct {
	closed atomic.Bool
	mu     sync.Mutex
	cond   sync.Cond
	// active counts the participants that have not left; parked, those
	// waiting at the closed gate. opened counts openings, so that a
	// participant leaves the wait on an opening even if the gate closed
	// again before it woke.
	active, parked int
	opened         uint64
}

func newGate(participants int) *gate {
	g := &gate{active: participants}
	g.cond.L = &g.mu
	return g
}

// wait returns at once while the gate is open, else once it opens.
func (g *gate) wait() {
	if !g.closed.Load() {
		return
	}
	g.mu.Lock()
	opened := g.opened
	g.parked++
	g.cond.Broadcast()
	for g.closed.Load() && g.opened == opened {
		g.cond.Wait()
	}
	g.parked--
	g.mu.Unlock()
}

// leave says a participant is done: close no longer waits for it.
func (g *gate) leave() {
	g.mu.Lock()
	g.active--
	g.cond.Broadcast()
	g.mu.Unlock()
}

// close closes the gate and returns once every active participant waits
// at it (each finishes the batch in hand first) or has left.
func (g *gate) close() {
	g.closed.Store(true)
	g.mu.Lock()
	for g.parked < g.active {
		g.cond.Wait()
	}
	g.mu.Unlock()
}

// open lets the participants go on.
func (g *gate) open() {
	g.mu.Lock()
	g.closed.Store(false)
	g.opened++
	g.cond.Broadcast()
	g.mu.Unlock()
}

// idle reports whether no participant is left.
func (g *gate) idle() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.active == 0
}
