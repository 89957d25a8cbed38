package partition

import (
	"errors"
	"testing"
	"time"
)

// WaitDurable past the log end is refused: no sync can ever cover it, and
// the wait used to run fdatasyncs in a loop for ever.
func TestWaitDurablePastLogEnd(t *testing.T) {
	t.Parallel()
	for _, kind := range []SyncKind{SyncNever, SyncAlways} {
		l, err := Open(t.TempDir(), Options{Sync: SyncPolicy{Kind: kind}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(makeBatch(t, 0, 2, 100, 1)); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- l.WaitDurable(3) }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrOffsetOutOfRange) {
				t.Errorf("policy %v: WaitDurable(3) with the log ending at 2: %v, want ErrOffsetOutOfRange", kind, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("policy %v: WaitDurable(3) with the log ending at 2 still running after 5 s", kind)
		}
		if err := l.WaitDurable(2); err != nil {
			t.Errorf("policy %v: WaitDurable(2): %v", kind, err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// A seal that fails while a group sync's fdatasyncs run (the kernel gave
// the writeback error to the seal's fsync, ours succeeded) leaves nothing
// counted durable by that sync.
func TestGroupSyncSeesFailureDuringItsSyncs(t *testing.T) {
	t.Parallel()
	l, err := Open(t.TempDir(), Options{Sync: SyncPolicy{Kind: SyncAlways}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	res := appendNoWait(t, l, makeBatch(t, 0, 2, 100, 1))
	l.opts.private.afterSyncDataHook = func(l *Log) { l.fail(errors.New("injected: a concurrent seal's fsync failed")) }
	if err := l.WaitDurable(res.LastOffset + 1); !errors.Is(err, ErrFailed) {
		t.Fatalf("WaitDurable with the log failed during the sync: %v, want ErrFailed", err)
	}
	if rp := l.recoveryPoint.Load(); rp > 0 {
		t.Fatalf("recovery point %d moved by a sync the log's failure should void", rp)
	}
}
