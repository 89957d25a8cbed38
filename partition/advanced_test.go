package partition

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
)

// advancedPolicies are the ways the high watermark moves: on the append
// (never, interval, bytes, always) or after the sync (always with durable
// visibility).
var advancedPolicies = []struct {
	name string
	opts Options
}{
	{"never", Options{}},
	{"always", Options{Sync: SyncPolicy{Kind: SyncAlways}}},
	{"always-durable", Options{Sync: SyncPolicy{Kind: SyncAlways}, DurableVisibility: true}},
	{"interval", Options{Sync: SyncPolicy{Kind: SyncInterval, Interval: time.Millisecond}}},
	{"bytes", Options{Sync: SyncPolicy{Kind: SyncBytes, Bytes: 1000}}},
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestAdvancedWakesOnAppend(t *testing.T) {
	t.Parallel()
	for _, pol := range advancedPolicies {
		t.Run(pol.name, func(t *testing.T) {
			l, err := Open(t.TempDir(), pol.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			for i := range 5 {
				ch := l.Advanced()
				if isClosed(ch) {
					t.Fatalf("round %d: channel closed before any append", i)
				}
				if l.Advanced() != ch {
					t.Fatalf("round %d: two waiters got different channels", i)
				}
				hw := l.HighWatermark()
				done := make(chan error, 1)
				go func() {
					_, err := l.Append(makeBatch(t, i, 2, 100, 1))
					done <- err
				}()
				select {
				case <-ch:
				case <-time.After(10 * time.Second):
					t.Fatalf("round %d: no wakeup after an append", i)
				}
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				if got := l.HighWatermark(); got != hw+2 {
					t.Fatalf("round %d: woken with high watermark %d, want %d", i, got, hw+2)
				}
			}
		})
	}
}

// A channel is closed only by a rise after it was taken: not by the rise
// just before, nor by anything that leaves the high watermark where it is.
func TestAdvancedNotSpurious(t *testing.T) {
	t.Parallel()
	for _, pol := range advancedPolicies {
		t.Run(pol.name, func(t *testing.T) {
			o := pol.opts
			o.Segment = smallSegments(2048).Segment
			l, err := Open(t.TempDir(), o)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			for i := range 20 { // through several rolls
				if _, err := l.Append(makeBatch(t, i, 1, 300, 1)); err != nil {
					t.Fatal(err)
				}
				ch := l.Advanced()
				if isClosed(ch) {
					t.Fatalf("append %d: a channel taken after the append is closed", i)
				}
				// Neither reads, nor flushes, nor retention of nothing move it.
				if _, err := l.Read(0, 1<<20); err != nil {
					t.Fatal(err)
				}
				if err := l.Flush(); err != nil {
					t.Fatal(err)
				}
				if _, err := l.syncOnce(); err != nil { // a sync with nothing new
					t.Fatal(err)
				}
				l.waitIdle()
				if err := l.WaitDurable(l.HighWatermark()); err != nil {
					t.Fatal(err)
				}
				if isClosed(ch) {
					t.Fatalf("append %d: channel closed without a rise of the high watermark", i)
				}
			}
		})
	}
}

// TestAdvancedNoMissedWakeup runs rounds in which every appender appends
// once and every waiter then waits for exactly that round's high
// watermark: the last rise of a round is followed by no other until all
// waiters are through, so a waiter that missed it would time out.
func TestAdvancedNoMissedWakeup(t *testing.T) {
	t.Parallel()
	for _, pol := range advancedPolicies {
		t.Run(pol.name, func(t *testing.T) {
			l, err := Open(t.TempDir(), pol.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			const appenders, waiters = 3, 4
			rounds := 300
			if pol.opts.Sync.Kind == SyncAlways {
				rounds = 100
			}
			b := makeBatch(t, 1, 1, 50, 1)
			var failed sync.Once
			fail := func(format string, args ...any) {
				failed.Do(func() { t.Errorf(format, args...) })
			}
			for r := range rounds {
				target := int64((r + 1) * appenders)
				var wg sync.WaitGroup
				for range waiters {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for {
							ch := l.Advanced()
							if l.HighWatermark() >= target {
								return
							}
							select {
							case <-ch:
							case <-time.After(10 * time.Second):
								fail("round %d: waiter missed a wakeup: high watermark %d, want %d", r, l.HighWatermark(), target)
								return
							}
						}
					}()
				}
				for range appenders {
					wg.Add(1)
					go func() {
						defer wg.Done()
						if _, err := l.Append(b); err != nil {
							fail("append: %v", err)
						}
					}()
				}
				wg.Wait()
				if t.Failed() {
					return
				}
			}
		})
	}
}

// The append callback runs before the batch is visible, even to a sync
// that runs meanwhile, and the wakeup comes after it: a waiter woken by the
// high watermark sees what the callback published (the engine's first
// unstable offset, behind the last stable offset).
func TestAppendCallbackBeforeVisible(t *testing.T) {
	t.Parallel()
	for _, pol := range advancedPolicies {
		t.Run(pol.name, func(t *testing.T) {
			l, err := Open(t.TempDir(), pol.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			for i := range 3 {
				raw := makeBatch(t, i, 2, 100, 1)
				v, err := batch.Validate(raw, 1<<20)
				if err != nil {
					t.Fatal(err)
				}
				var ch <-chan struct{}
				var syncer sync.WaitGroup
				res, wait, err := l.AppendBatch(v, func(base int64) {
					if hw := l.HighWatermark(); hw > base {
						t.Errorf("batch at %d visible (high watermark %d) before its callback ran", base, hw)
					}
					// A sync running now (the group-sync leader, the
					// interval flusher) must not publish it either.
					// Under SyncAlways a sync starts under the writer
					// mutex (startStaging), so it runs alongside, given
					// time to get as far as it can.
					if pol.opts.Sync.Kind == SyncAlways {
						syncer.Go(func() {
							if _, err := l.syncOnce(); err != nil {
								t.Error(err)
							}
						})
						time.Sleep(10 * time.Millisecond)
					} else if _, err := l.syncOnce(); err != nil {
						t.Error(err)
					}
					if hw := l.HighWatermark(); hw > base {
						t.Errorf("batch at %d published by a sync (high watermark %d) before its callback returned", base, hw)
					}
					ch = l.Advanced()
				})
				syncer.Wait()
				if err != nil {
					t.Fatal(err)
				}
				if wait {
					if err := l.WaitDurable(res.LastOffset + 1); err != nil {
						t.Fatal(err)
					}
				}
				if !isClosed(ch) {
					t.Fatalf("append %d: channel taken in the callback not closed once the batch is visible", i)
				}
			}
		})
	}
}

func TestAdvancedClose(t *testing.T) {
	t.Parallel()
	for _, kill := range []bool{false, true} {
		t.Run(fmt.Sprintf("kill=%v", kill), func(t *testing.T) {
			l, err := Open(t.TempDir(), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.Append(makeBatch(t, 1, 1, 100, 1)); err != nil {
				t.Fatal(err)
			}
			c, err := l.Read(0, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			ch := l.Advanced()
			woke := make(chan struct{})
			go func() {
				<-ch
				close(woke)
			}()
			if kill {
				l.Kill()
			} else if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-woke:
			case <-time.After(10 * time.Second):
				t.Fatal("parked reader not woken by the close")
			}
			if !isClosed(l.Advanced()) {
				t.Fatal("Advanced after the close returns an open channel")
			}
			if _, err := l.Read(0, 1<<20); !errors.Is(err, ErrClosed) {
				t.Fatalf("Read after the close: %v, want ErrClosed", err)
			}
			if _, err := l.Read(l.HighWatermark(), 1<<20); !errors.Is(err, ErrClosed) {
				t.Fatalf("Read at the high watermark after the close: %v, want ErrClosed", err)
			}
			if _, err := l.Append(makeBatch(t, 2, 1, 100, 1)); !errors.Is(err, ErrClosed) {
				t.Fatalf("Append after the close: %v, want ErrClosed", err)
			}
			// A chunk read before the close stays readable until released.
			if n, err := batch.Size(c.Data); err != nil || n != len(c.Data) {
				t.Fatalf("chunk held across the close: size %d of %d, %v", n, len(c.Data), err)
			}
			if _, err := batch.Validate(c.Data, 1<<20); err != nil {
				t.Fatalf("chunk held across the close: %v", err)
			}
			c.Release()
		})
	}
}
