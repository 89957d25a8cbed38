package testutil

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"
)

const childModeEnv = "IDEMLOG_TESTUTIL_CHILD"

// TestReporterChild is the child of the tests below: it acknowledges
// numbers from 0 up until killed ("ack"), or says "done" after three
// ("finish").
func TestReporterChild(t *testing.T) {
	mode := os.Getenv(childModeEnv)
	if mode == "" {
		t.Skip("child process of TestWatch*")
	}
	r := NewReporter()
	r.Say("ready")
	for i := 0; ; i++ {
		if mode == "finish" && i == 3 {
			r.Say("done")
			os.Exit(0)
		}
		r.Say("ack %d", i)
		time.Sleep(time.Millisecond)
	}
}

// A child killed after "ready" and at least five acknowledgements dies of
// the parent's SIGKILL, with every line it said before delivered in order.
func TestWatchKillsAfterReady(t *testing.T) {
	t.Parallel()
	c := StartChild(t, "TestReporterChild", childModeEnv+"=ack")
	acks := 0
	res := c.Watch(t, "ack child", Watch{
		KillAfter: time.Millisecond,
		KillWhen:  func() bool { return acks >= 5 },
		Line: func(f []string) error {
			if n, err := strconv.Atoi(f[1]); f[0] != "ack" || err != nil || n != acks {
				return fmt.Errorf("line %q after %d acknowledgements", f, acks)
			}
			acks++
			return nil
		},
	})
	if !res.Killed || !res.SIGKILLed || acks < 5 {
		t.Fatalf("watched %+v after %d acknowledgements; want killed by the parent after at least 5", res, acks)
	}
}

// A child that runs to its end is neither killed nor failed.
func TestWatchLetsChildFinish(t *testing.T) {
	t.Parallel()
	c := StartChild(t, "TestReporterChild", childModeEnv+"=finish")
	var lines []string
	res := c.Watch(t, "finishing child", Watch{Line: func(f []string) error {
		lines = append(lines, f[0])
		return nil
	}})
	if res.Killed || res.SIGKILLed || res.Err != nil || fmt.Sprint(lines) != "[ack ack ack done]" {
		t.Fatalf("watched %+v, lines %v; want a clean exit after 3 acknowledgements and done", res, lines)
	}
}
