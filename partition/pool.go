package partition

import (
	"runtime"
	"sync"
	"time"
)

// Background work of every log in the process (seals, spares,
// prefaulting, deleting retired files, interval flushes) runs on one
// small pool of goroutines, not on goroutines and tickers of its own: a
// process holding 10,000 partitions that take appends now and then would
// otherwise keep 10,000 maintainers, and under SyncInterval 10,000
// tickers waking each interval whether or not anything was written.
//
// Each log keeps its tasks in its own queue (maintainer.queue), run in
// order and one at a time, so a log's segments are still sealed in
// offset order and its recovery point only moves forward. A log with
// tasks is on the pool's run queue at most once (maintainer.scheduled);
// a worker runs a few of its tasks and puts it back at the end if more
// are left, so one busy log does not keep the others waiting. A log
// with nothing queued costs nothing: no goroutine, no timer, no wakeup.
type pool struct {
	mu      sync.Mutex
	cond    sync.Cond
	runq    []*Log
	workers int
	started int
}

// background is the process's pool: twice the cores, at least four, as
// its tasks wait on the device (a seal's fsync) as much as they compute.
var background = newPool(max(4, 2*runtime.GOMAXPROCS(0)))

func newPool(workers int) *pool {
	p := &pool{workers: workers}
	p.cond.L = &p.mu
	return p
}

// schedule puts l on the run queue, starting a worker if fewer than the
// pool's size run (workers start on first use and then stay, parked on
// cond while there is nothing to run).
func (p *pool) schedule(l *Log) {
	p.mu.Lock()
	p.runq = append(p.runq, l)
	if p.started < p.workers {
		p.started++
		go p.work()
	}
	p.mu.Unlock()
	p.cond.Signal()
}

// tasksPerTurn is how many of one log's tasks a worker runs before it
// lets the next log have a turn.
const tasksPerTurn = 8

func (p *pool) work() {
	for {
		p.mu.Lock()
		for len(p.runq) == 0 {
			p.cond.Wait()
		}
		l := p.runq[0]
		p.runq[0] = nil
		p.runq = p.runq[1:]
		p.mu.Unlock()
		l.runTurn()
	}
}

// runTurn runs up to tasksPerTurn of l's queued tasks. If more are left
// l goes back on the run queue; if none, it leaves it (scheduled false,
// bg done), and the next submit schedules it again.
func (l *Log) runTurn() {
	m := &l.maint
	for range tasksPerTurn {
		m.qmu.Lock()
		if len(m.queue) == 0 {
			m.scheduled = false
			m.qmu.Unlock()
			l.bg.Done()
			return
		}
		t := m.queue[0]
		m.queue[0] = task{}
		m.queue = m.queue[1:]
		m.qmu.Unlock()
		l.runTask(t)
	}
	background.schedule(l)
}

// armFlush makes sure, under SyncInterval, that what was just committed
// is synced within the interval (under mu): the first commit after a
// flush arms a timer for one interval, and the flush it queues
// (taskFlush) disarms it before it reads the log end, so that a commit
// after the disarm arms the next. A log that takes no appends holds no
// timer.
func (l *Log) armFlushLocked() {
	if l.flushArmed || l.closed {
		return
	}
	l.flushArmed = true
	if l.flushTimer == nil {
		l.flushTimer = time.AfterFunc(l.opts.Sync.Interval, l.flushDue)
		return
	}
	l.flushTimer.Reset(l.opts.Sync.Interval)
}

// flushDue queues the interval flush, unless the log closed meanwhile
// (Close syncs everything itself).
func (l *Log) flushDue() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.submit(task{kind: taskFlush})
}

// intervalFlush is taskFlush: it disarms the timer, then syncs up to the
// log end. Every commit before the disarm (both under mu) is below the
// end Flush reads after it; every one after arms the timer again.
func (l *Log) intervalFlush() {
	l.mu.Lock()
	l.flushArmed = false
	closed := l.closed
	l.mu.Unlock()
	if !closed { // Close syncs everything itself
		_ = l.Flush()
	}
}
