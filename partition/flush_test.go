package partition

import (
	"errors"
	"testing"
	"time"
)

// openFlush opens a log whose own policy is never, with flush policy f.
func openFlush(t *testing.T, f FlushPolicy) *Log {
	t.Helper()
	opts := smallSegments(1 << 20)
	opts.Sync = SyncPolicy{Kind: SyncNever}
	opts.Flush = f
	l, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// TestFlushMessagesOneSyncsEveryAppend: flush.messages=1 on a log whose
// own policy is never makes every append wait for a sync (MustWait, the
// recovery point past the batch when Append returns); SetFlush back to
// nothing stops the syncing from the next append.
func TestFlushMessagesOneSyncsEveryAppend(t *testing.T) {
	l := openFlush(t, FlushPolicy{Messages: 1})
	if !l.MustWait() {
		t.Fatal("MustWait false under flush.messages=1")
	}
	for i := range 3 {
		syncs := l.Syncs()
		res, err := l.Append(makeBatch(t, i, 2, 100, 1))
		if err != nil {
			t.Fatal(err)
		}
		if rp := l.RecoveryPoint(); rp <= res.LastOffset {
			t.Fatalf("append %d acknowledged at recovery point %d: batch %d..%d not synced", i, rp, res.BaseOffset, res.LastOffset)
		}
		if l.Syncs() == syncs {
			t.Fatalf("append %d ran no sync", i)
		}
	}
	if err := l.SetFlush(FlushPolicy{}); err != nil {
		t.Fatal(err)
	}
	if l.MustWait() {
		t.Fatal("MustWait true after the flush policy was removed")
	}
	syncs, rp := l.Syncs(), l.RecoveryPoint()
	for i := range 3 {
		_, wait, err := l.AppendBatch(mustValidate(t, makeBatch(t, 10+i, 2, 100, 1)), nil)
		if err != nil || wait {
			t.Fatalf("append %d after the flush policy was removed: wait %v, %v", i, wait, err)
		}
	}
	if l.Syncs() != syncs || l.RecoveryPoint() != rp {
		t.Errorf("syncs %d -> %d, recovery point %d -> %d: the removed flush policy still syncs", syncs, l.Syncs(), rp, l.RecoveryPoint())
	}
}

// TestSetFlushMessagesOneLive: a log opened without a flush policy starts
// syncing every append once SetFlush asks for it, without a reopen.
func TestSetFlushMessagesOneLive(t *testing.T) {
	l := openFlush(t, FlushPolicy{})
	if _, wait, err := l.AppendBatch(mustValidate(t, makeBatch(t, 0, 1, 100, 1)), nil); err != nil || wait {
		t.Fatalf("append under never: wait %v, %v", wait, err)
	}
	if err := l.SetFlush(FlushPolicy{Messages: 1}); err != nil {
		t.Fatal(err)
	}
	res, err := l.Append(makeBatch(t, 1, 1, 100, 1))
	if err != nil {
		t.Fatal(err)
	}
	if rp := l.RecoveryPoint(); rp <= res.LastOffset {
		t.Errorf("append after SetFlush(messages=1) acknowledged at recovery point %d, batch ends at %d", rp, res.LastOffset)
	}
}

// TestFlushMessagesCount: Kafka's rule for flush.messages=N: an append
// that leaves N offsets or more above the recovery point waits for a sync;
// those that leave fewer do not.
func TestFlushMessagesCount(t *testing.T) {
	l := openFlush(t, FlushPolicy{Messages: 4})
	if l.MustWait() {
		t.Fatal("MustWait true under flush.messages=4")
	}
	// Batches of 2 offsets: the end 2 passes, 4 reaches 4 above 0 and
	// waits; then 6 passes, 8 reaches 4 above the recovery point 4.
	for i, want := range []bool{false, true, false, true} {
		res, wait, err := l.AppendBatch(mustValidate(t, makeBatch(t, i, 2, 100, 1)), nil)
		if err != nil {
			t.Fatal(err)
		}
		if wait != want {
			t.Fatalf("append %d (offsets %d..%d, recovery point %d): wait %v, want %v", i, res.BaseOffset, res.LastOffset, l.RecoveryPoint(), wait, want)
		}
		if wait {
			if err := l.WaitDurable(res.LastOffset + 1); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestFlushIntervalLive: a flush interval set on an open log starts a
// flusher that syncs what was appended without anyone waiting; removed,
// the flusher stops syncing.
func TestFlushIntervalLive(t *testing.T) {
	l := openFlush(t, FlushPolicy{})
	res, _, err := l.AppendBatch(mustValidate(t, makeBatch(t, 0, 1, 100, 1)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.SetFlush(FlushPolicy{Interval: 5 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for l.RecoveryPoint() <= res.LastOffset {
		if time.Now().After(deadline) {
			t.Fatalf("flush.ms=5: recovery point %d 10s later, batch ends at %d", l.RecoveryPoint(), res.LastOffset)
		}
		time.Sleep(time.Millisecond)
	}
	if err := l.SetFlush(FlushPolicy{}); err != nil {
		t.Fatal(err)
	}
	// A tick taken before the flusher saw the change may still be
	// syncing: let it end.
	time.Sleep(100 * time.Millisecond)
	res, _, err = l.AppendBatch(mustValidate(t, makeBatch(t, 1, 1, 100, 1)), nil)
	if err != nil {
		t.Fatal(err)
	}
	syncs := l.Syncs()
	time.Sleep(200 * time.Millisecond)
	if l.Syncs() != syncs || l.RecoveryPoint() > res.LastOffset {
		t.Errorf("after the interval was removed: syncs %d -> %d, recovery point %d past batch %d", syncs, l.Syncs(), l.RecoveryPoint(), res.LastOffset)
	}
}

// TestFlushNeverWeakensSync: a flush policy adds syncs to the log's own
// policy and takes none away: under SyncAlways, removing or loosening
// it leaves every append waiting.
func TestFlushNeverWeakensSync(t *testing.T) {
	opts := smallSegments(1 << 20)
	opts.Sync = SyncPolicy{Kind: SyncAlways}
	opts.Flush = FlushPolicy{Messages: 1000, Interval: time.Hour}
	l, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, f := range []FlushPolicy{{Messages: 1000}, {}} {
		if err := l.SetFlush(f); err != nil {
			t.Fatal(err)
		}
		if _, wait, err := l.AppendBatch(mustValidate(t, makeBatch(t, 0, 1, 100, 1)), nil); err != nil || !wait || !l.MustWait() {
			t.Errorf("flush %v under SyncAlways: wait %v, MustWait %v, %v", f, wait, l.MustWait(), err)
		}
	}
}

// TestFlushPolicyNegativeRefused: a negative count or interval is a bad
// policy, refused by Open and SetFlush with ErrInvalidSyncPolicy, and
// SetFlush's refusal leaves the policy in force.
func TestFlushPolicyNegativeRefused(t *testing.T) {
	for _, f := range []FlushPolicy{{Messages: -1}, {Interval: -time.Second}} {
		opts := smallSegments(1 << 20)
		opts.Flush = f
		if l, err := Open(t.TempDir(), opts); !errors.Is(err, ErrInvalidSyncPolicy) {
			if err == nil {
				l.Close()
			}
			t.Errorf("Open with %v: %v, want ErrInvalidSyncPolicy", f, err)
		}
	}
	l := openFlush(t, FlushPolicy{Messages: 1})
	if err := l.SetFlush(FlushPolicy{Messages: -1}); !errors.Is(err, ErrInvalidSyncPolicy) {
		t.Errorf("SetFlush(messages=-1): %v, want ErrInvalidSyncPolicy", err)
	}
	if !l.MustWait() || l.FlushPolicy() != (FlushPolicy{Messages: 1}) {
		t.Errorf("after a refused SetFlush the policy is %v (MustWait %v), want messages=1", l.FlushPolicy(), l.MustWait())
	}
}

// TestFlushRemovedDuringStagingSync: a group sync that started under
// flush.messages=1 stages the appends that arrive while it runs, in this
// process's memory. If the flush policy is removed meanwhile, such an
// append must still wait for a sync and stay invisible: acknowledged
// unsynced, as never promises, it would be lost by a process crash
// (never's promise is the page cache), and published, readers would read
// bytes not yet in the file.
func TestFlushRemovedDuringStagingSync(t *testing.T) {
	l := openFlush(t, FlushPolicy{Messages: 1})
	first, _, err := l.AppendBatch(mustValidate(t, makeBatch(t, 0, 1, 100, 1)), nil)
	if err != nil {
		t.Fatal(err)
	}
	inSync, release := make(chan struct{}), make(chan struct{})
	l.opts.private.afterSyncDataHook = func(*Log) {
		l.opts.private.afterSyncDataHook = nil
		close(inSync)
		<-release
	}
	done := make(chan error, 1)
	go func() { done <- l.WaitDurable(first.LastOffset + 1) }()
	<-inSync
	if err := l.SetFlush(FlushPolicy{}); err != nil {
		t.Fatal(err)
	}
	res, wait, err := l.AppendBatch(mustValidate(t, makeBatch(t, 1, 1, 100, 1)), nil)
	if err != nil {
		t.Fatal(err)
	}
	hw := l.HighWatermark()
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !wait {
		t.Errorf("append staged by a sync in flight, after the flush policy was removed: wait false, so it was acknowledged from process memory")
	}
	if hw > res.BaseOffset {
		t.Errorf("staged batch at %d visible (high watermark %d) before it was in the file", res.BaseOffset, hw)
	}
	if err := l.WaitDurable(res.LastOffset + 1); err != nil {
		t.Fatal(err)
	}
	if hw := l.HighWatermark(); hw <= res.LastOffset {
		t.Errorf("high watermark %d after the next sync, batch ends at %d", hw, res.LastOffset)
	}
}
