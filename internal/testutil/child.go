package testutil

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Child is a crash test's child process: the test binary again, running
// one test, that reports on stdout, line by line, what it did (one line
// per acknowledgement, written before the next operation starts), so that
// the parent knows what it must find on disk after the SIGKILL.
type Child struct {
	cmd *exec.Cmd
	// Lines carries the child's stdout, line by line; it is closed when
	// the child's stdout closes.
	Lines  <-chan string
	killed atomic.Bool
}

// StartChild re-executes the test binary running only the test named test
// (exactly), with env added to the environment. The child's stderr goes to
// the parent's.
func StartChild(t testing.TB, test string, env ...string) *Child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.v=false")
	cmd.Env = append(os.Environ(), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	return &Child{cmd: cmd, Lines: lines}
}

// Kill sends SIGKILL; the child dies without running any cleanup.
func (c *Child) Kill() {
	c.killed.Store(true)
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
}

// Abort kills the child, drains its output and reaps it: for a parent that
// is about to fail the test.
func (c *Child) Abort() {
	c.Kill()
	for range c.Lines {
	}
	_ = c.cmd.Wait()
}

// Wait reaps the child (after Lines closed) and reports whether SIGKILL
// ended it (the parent's Kill or the child's own), and otherwise its exit
// error (nil for a clean exit).
func (c *Child) Wait() (sigkilled bool, err error) {
	err = c.cmd.Wait()
	ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, err
}

// Watch is how a parent drives a child through Child.Watch.
type Watch struct {
	// KillAfter is how long after the child's "ready" line the parent
	// sends SIGKILL; 0: never (the child runs to its end).
	KillAfter time.Duration
	// KillWhen, if set, holds the kill back, once KillAfter has passed,
	// until it returns true (checked at each line): on a loaded machine
	// the delay can pass before the child did anything worth a crash.
	KillWhen func() bool
	// Guard fails the test if the child still runs this long after it
	// started (0: a minute).
	Guard time.Duration
	// Line sees every line but "ready" and "error ..." (which fails the
	// test), split into fields; an error it returns fails the test. It
	// may call Kill itself (a child that reports reaching a step).
	Line func(fields []string) error
}

// Watched is what became of a watched child.
type Watched struct {
	// Killed: the parent sent SIGKILL and the child died of a SIGKILL.
	Killed bool
	// SIGKILLed: the child died of a SIGKILL, the parent's or its own.
	SIGKILLed bool
	// Err is the child's exit error (nil for a clean exit).
	Err error
}

// Watch reads the child's lines until its stdout closes, following w, and
// reaps it. On "error ...", on an error from w.Line and at the guard it
// aborts the child and fails the test, the message prefixed by name.
func (c *Child) Watch(t testing.TB, name string, w Watch) Watched {
	t.Helper()
	fatal := func(format string, args ...any) {
		t.Helper()
		c.Abort()
		t.Fatalf("%s: "+format, append([]any{name}, args...)...)
	}
	if w.Guard <= 0 {
		w.Guard = time.Minute
	}
	guard := time.After(w.Guard)
	var kill <-chan time.Time
	due := false
read:
	for {
		select {
		case line, ok := <-c.Lines:
			if !ok {
				break read
			}
			switch f := strings.Fields(line); {
			case len(f) == 0:
			case f[0] == "ready":
				if w.KillAfter > 0 && !c.killed.Load() {
					kill = time.After(w.KillAfter)
				}
			case f[0] == "error":
				fatal("child: %s", line)
			case w.Line != nil:
				if err := w.Line(f); err != nil {
					fatal("%v", err)
				}
			}
		case <-kill:
			kill, due = nil, true
		case <-guard:
			fatal("child still running after %v", w.Guard)
		}
		if due && (w.KillWhen == nil || w.KillWhen()) {
			c.Kill()
			due = false
		}
	}
	sigkilled, err := c.Wait()
	return Watched{Killed: c.killed.Load() && sigkilled, SIGKILLed: sigkilled, Err: err}
}

// Reporter is a child's side: it writes the lines its parent reads, each
// flushed at once, from any goroutine.
type Reporter struct {
	mu sync.Mutex
	w  *bufio.Writer
}

// NewReporter returns a Reporter on stdout.
func NewReporter() *Reporter { return &Reporter{w: bufio.NewWriter(os.Stdout)} }

// Say writes one line and flushes it: once Say returns, the parent gets
// the line even if the child is killed next.
func (r *Reporter) Say(format string, args ...any) {
	r.mu.Lock()
	fmt.Fprintf(r.w, format+"\n", args...)
	r.w.Flush()
	r.mu.Unlock()
}

// Fail says "error ..." and exits with status 3: the parent fails the test
// with the line.
func (r *Reporter) Fail(format string, args ...any) {
	r.Say("error "+format, args...)
	os.Exit(3)
}
