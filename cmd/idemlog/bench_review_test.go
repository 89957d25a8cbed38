//go:build linux

package main

import (
	"strings"
	"testing"
	"time"
)

// TestReviewBenchZeroEnd: an explicit --records 0 or --duration 0 is not a
// run length; it must be rejected (exit 2), not turned into the 10 s default.
func TestReviewBenchZeroEnd(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "--records", "0", "--quiet", "--baseline-max", "0", "--producers", "1", "--partitions", "1", "--dir", t.TempDir()},
		{"bench", "--duration", "0", "--quiet", "--baseline-max", "0", "--producers", "1", "--partitions", "1", "--dir", t.TempDir()},
	} {
		start := time.Now()
		code, stdout, stderr := runCLI(args...)
		if code != 2 {
			t.Errorf("%q: exit %d after %v, want 2 (stderr %q)\n%s", args, code, time.Since(start).Round(time.Millisecond), stderr, stdout)
		}
	}
}

// TestReviewBenchIgnoredFlags: flags that only mean something in another
// mode are silently accepted and echoed in the workload as if they applied.
func TestReviewBenchIgnoredFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--mode", "idempotent", "--txn-batches", "5"},
		{"--mode", "plain", "--txn-batches", "5"},
		{"--isolation", "read_committed"}, // no --readers
	} {
		all := append([]string{"bench", "--records", "100", "--quiet", "--baseline-max", "0", "--dir", t.TempDir()}, args...)
		code, _, stderr := runCLI(all...)
		if code != 2 {
			t.Errorf("%q: exit %d, want 2: the flag has no effect in this workload (stderr %q)", args, code, stderr)
		} else if !strings.Contains(stderr, strings.TrimPrefix(args[len(args)-2], "--")) {
			t.Errorf("%q: stderr %q", args, stderr)
		}
	}
}

// TestReviewBenchPlotPathChecked: output files are created before the run
// "so that a bad path fails before the run", but --plot is opened only
// after the whole run (and the baseline), which is then lost, exit 1.
func TestReviewBenchPlotPathChecked(t *testing.T) {
	start := time.Now()
	code, stdout, stderr := runCLI("bench", "--duration", "1s", "--quiet", "--baseline-max", "0", "--plot", "/nonexistent/dir/x.svg", "--dir", t.TempDir())
	if code != 2 || time.Since(start) > 500*time.Millisecond {
		t.Errorf("--plot into a missing dir: exit %d after %v, want 2 before the run (stderr %q)\n%s", code, time.Since(start).Round(time.Millisecond), stderr, stdout)
	}
}
