// Package child runs one test of the current test binary as a child
// process, for tests that must really kill a process (SIGKILL, as a crash
// does) or must not touch a FUSE mount that their own process serves: a
// store into a mapping of such a mount faults into the kernel, which waits
// for the serving goroutine, which the garbage collector may have stopped
// while it waits for the faulting thread. The child reports on stdout, one
// line per event; the parent reads the lines as they come.
package child

import (
	"bufio"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// Child is a running child test.
type Child struct {
	cmd *exec.Cmd
	// Lines carries the child's stdout, line by line; it is closed when
	// the child's stdout closes.
	Lines <-chan string
}

// Start re-executes the test binary running only the test named test
// (exactly), with env added to the environment. The child's stderr goes to
// the parent's.
func Start(t testing.TB, test string, env ...string) *Child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.v=false", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 4096)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	return &Child{cmd: cmd, Lines: lines}
}

// Kill sends SIGKILL; the child dies without running any cleanup.
func (c *Child) Kill() { _ = c.cmd.Process.Signal(syscall.SIGKILL) }

// Wait drains the child's output and reaps it. It reports whether SIGKILL
// ended it, and otherwise its exit error (nil for a clean exit).
func (c *Child) Wait() (killed bool, err error) {
	for range c.Lines {
	}
	err = c.cmd.Wait()
	ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, err
}

// Abort kills the child and reaps it: for a parent about to fail.
func (c *Child) Abort() {
	c.Kill()
	_, _ = c.Wait()
}
