// Package childproc runs one test of the current test binary as a child
// process, for crash tests that must really kill a process: the child
// reports on stdout, the parent reads the lines and sends SIGKILL at a
// moment of its choosing, then checks what survived on disk.
package childproc

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
func (c *Child) Kill() { _ = c.cmd.Process.Signal(syscall.SIGKILL) }

// Abort kills the child, drains its output and reaps it: for a parent that
// is about to fail the test.
func (c *Child) Abort() {
	c.Kill()
	for range c.Lines {
	}
	_ = c.cmd.Wait()
}

// Wait reaps the child (after Lines closed) and reports whether SIGKILL
// ended it, and otherwise its exit error (nil for a clean exit).
func (c *Child) Wait() (killed bool, err error) {
	err = c.cmd.Wait()
	ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, err
}
