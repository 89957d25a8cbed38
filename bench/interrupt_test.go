//go:build linux

package bench

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

// signalCtx is a context that a Ctrl-C cancels at a chosen instant: once
// armed, it is cancelled at the after-th call of Err, as if the signal had
// come just then.
type signalCtx struct {
	mu       sync.Mutex
	armed    bool
	after    int
	calls    int
	err      error
	done     chan struct{}
	progress strings.Builder
}

func (c *signalCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *signalCtx) Done() <-chan struct{}       { return c.done }
func (c *signalCtx) Value(any) any               { return nil }
func (c *signalCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.armed && c.err == nil {
		if c.calls++; c.calls >= c.after {
			c.err = context.Canceled
			close(c.done)
		}
	}
	return c.err
}

// Write is the progress display: the baseline's announcement arms the
// signal.
func (c *signalCtx) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.progress.Write(p)
	if strings.Contains(string(p), "measuring the baseline") {
		c.armed = true
	}
	return len(p), nil
}

// TestInterruptDuringBaseline: a Ctrl-C is meant to wind the run
// down and still report it (cmd/idemlog/bench.go: "After the first signal
// the run winds down and reports"; Run: "Cancelling ctx ends the run early
// (the result says Interrupted)"). One that comes while the baseline is
// being measured (after the run; it can take seconds, and the progress
// line says so) makes Run fail with "context canceled" instead: the
// write+fdatasync baseline's zero fill returns ctx.Err() as an error, and
// the whole measured run is lost (the command exits 1, no report).
func TestInterruptDuringBaseline(t *testing.T) {
	ctx := &signalCtx{after: 2, done: make(chan struct{})}
	c := small(t)
	c.Quiet = false
	c.BaselineMax = 2 * time.Second
	res, err := Run(ctx, c, ctx)
	if err != nil {
		t.Fatalf("Ctrl-C during the baseline: Run failed: %v (the run itself had finished; progress %q)", err, ctx.progress.String())
	}
	if res.Records != c.Records {
		t.Errorf("records %d, want %d", res.Records, c.Records)
	}
}
