package partition

import (
	"runtime"
	"testing"
	"time"
)

// TestWokenLogsShareThePool: every log that took an append ran its own
// maintainer goroutine, and under SyncInterval a flusher with a ticker
// too, so that a process with thousands of partitions in use kept
// thousands of goroutines and woke every interval for each. Their
// background work now runs on the process's pool: 200 logs in use add
// no more goroutines than the pool's workers.
func TestWokenLogsShareThePool(t *testing.T) {
	const n = 200
	g0 := runtime.NumGoroutine()
	opts := smallSegments(4096)
	opts.Sync = SyncPolicy{Kind: SyncInterval, Interval: 5 * time.Millisecond}
	logs := make([]*Log, n)
	for i := range logs {
		l, err := Open(t.TempDir(), opts)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		// Enough to roll: seals and spares are queued too.
		for j := range 40 {
			if _, err := l.Append(makeBatch(t, j, 10, 20, 1)); err != nil {
				t.Fatal(err)
			}
		}
		logs[i] = l
	}
	if extra := runtime.NumGoroutine() - g0; extra > background.workers+4 {
		t.Fatalf("%d logs in use run %d goroutines, want at most the pool's %d workers", n, extra, background.workers)
	}
	// Every log's appends become durable within its interval (taskFlush),
	// and then it holds no armed flush: nothing wakes for it.
	deadline := time.Now().Add(30 * time.Second)
	for _, l := range logs {
		for {
			l.mu.Lock()
			armed, leo := l.flushArmed, l.leo
			l.mu.Unlock()
			if l.RecoveryPoint() >= leo && !armed {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: recovery point %d of %d, flush armed %v, 30 s after its appends", l.dir, l.RecoveryPoint(), leo, armed)
			}
			time.Sleep(time.Millisecond)
		}
	}
	// One more append arms one flush, which makes it durable.
	l := logs[0]
	res, err := l.Append(makeBatch(t, 99, 10, 20, 1))
	if err != nil {
		t.Fatal(err)
	}
	for l.RecoveryPoint() <= res.LastOffset {
		if time.Now().After(deadline) {
			t.Fatalf("recovery point %d, append ended at %d", l.RecoveryPoint(), res.LastOffset)
		}
		time.Sleep(time.Millisecond)
	}
}
