package partition

import (
	"errors"
	"testing"
	"time"
)

// WaitDurable past the log end is refused: no sync can ever cover it, and
// the wait used to run fdatasyncs in a loop for ever.
func TestReviewWaitDurablePastLogEnd(t *testing.T) {
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
