package partition

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemlog/idemlog/internal/testutil"
	"github.com/idemlog/idemlog/segment"
)

const (
	cleanCrashDirEnv  = "IDEMLOG_CLEAN_CRASH_DIR"
	cleanCrashStepEnv = "IDEMLOG_CLEAN_CRASH_STEP"
)

// cleanCrashSteps are the moments of a swap (swapIn) at which the child
// is killed, in order, with what an open must then find: the old
// segments up to the commit point ("swapped"), the cleaned ones after.
var cleanCrashSteps = []struct {
	step    string
	cleaned bool
}{
	{"cleaned", false},        // the .cleaned files complete, nothing renamed
	{"swap-partial", false},   // one file .swap, the others .cleaned
	{"swapped", true},         // every file .swap and synced: committed
	{"deleted-partial", true}, // one old segment's files .deleted
	{"deleted", true},         // every old segment .deleted
	{"final-partial", true},   // one .swap renamed to its final name
	{"done", true},            // swap complete, .deleted files left
}

// cleanCrashScript is 10 segments of kN@N, then newer values of the odd
// keys: cleaning the first 10 segments (one group) removes the odd keys
// from them (Kafka's testRecoveryAfterCrash).
const cleanCrashScript = "k0 | k1 | k2 | k3 | k4 | k5 | k6 | k7 | k8 | k9 | k1 k3 k5 k7 k9 | kx"

const (
	cleanCrashOld = "0:0 1:1 2:2 3:3 4:4 5:5 6:6 7:7 8:8 9:9 10:1 11:3 12:5 13:7 14:9 15:x"
	cleanCrashNew = "0:0 2:2 4:4 6:6 8:8 10:1 11:3 12:5 13:7 14:9 15:x"
)

// TestCleanCrashChild is the child of TestCleanCrashKill: it cleans the
// log in its directory and stops at the step named in its environment,
// saying so, until the parent kills it.
func TestCleanCrashChild(t *testing.T) {
	dir := os.Getenv(cleanCrashDirEnv)
	if dir == "" {
		t.Skip("child process of TestCleanCrashKill")
	}
	step := os.Getenv(cleanCrashStepEnv)
	r := testutil.NewReporter()
	knobs := logKnobs{cleanStepHook: func(s string) {
		if s == step {
			r.Say("at %s", s)
			time.Sleep(time.Hour) // until SIGKILL
		}
	}}
	l, err := Open(dir, Options{NoRecycle: true, Logger: slog.New(slog.DiscardHandler), private: knobs})
	if err != nil {
		r.Fail("%v", err)
	}
	if _, err := l.Clean(CleanConfig{DeleteRetention: time.Hour}); err != nil {
		r.Fail("%v", err)
	}
	r.Fail("the pass ended without reaching the step")
}

// TestCleanCrashKill kills a process in the middle of a cleaning at each
// step of the swap (SIGKILL, no cleanup) and checks that the log opens to
// either the old segments or the cleaned one, as the step's place before
// or after the commit point says, never a mix, and that no temporary file
// of the swap is left (Kafka's testRecoveryAfterCrash states).
func TestCleanCrashKill(t *testing.T) {
	for _, tc := range cleanCrashSteps {
		t.Run(tc.step, func(t *testing.T) {
			c := newCompactLog(t)
			c.run(cleanCrashScript)
			dir := c.l.Dir()
			if err := c.l.Close(); err != nil {
				t.Fatal(err)
			}
			ch := testutil.StartChild(t, "TestCleanCrashChild", cleanCrashDirEnv+"="+dir, cleanCrashStepEnv+"="+tc.step)
			reached := false
			w := ch.Watch(t, tc.step, testutil.Watch{Line: func(f []string) error {
				if reached || len(f) != 2 || f[0] != "at" || f[1] != tc.step {
					return fmt.Errorf("child said %q", strings.Join(f, " "))
				}
				reached = true
				ch.Kill()
				return nil
			}})
			if !reached {
				t.Fatal("the child ended without reaching the step")
			}
			if !w.Killed {
				t.Fatal("the child was not killed")
			}
			l, err := Open(dir, Options{NoRecycle: true, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			c.l = l
			want := cleanCrashOld
			if tc.cleaned {
				want = cleanCrashNew
			}
			c.wantRecords(want)
			wantBases := 12
			if tc.cleaned {
				wantBases = 2 // one group and the active segment
			}
			if n := len(l.SegmentBases()); n != wantBases {
				t.Fatalf("%d segments %v, want %d", n, l.SegmentBases(), wantBases)
			}
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				for _, suf := range []string{suffixCleaned, suffixSwap, suffixDeleted} {
					if strings.HasSuffix(e.Name(), suf) {
						t.Fatalf("%s left after the open", e.Name())
					}
				}
			}
			// The log goes on: appends, and a cleaning that now succeeds.
			c.run("k0 k2 | k9")
			c.clean(CleanConfig{})
			c.wantRecords("4:4 6:6 8:8 10:1 11:3 12:5 13:7 14:9 15:x 16:0 17:2 18:9")
		})
	}
}

// A .swap of a complete swap whose .log was already renamed (only the
// .timeindex left, Kafka's state 5) is completed: the other files are
// not taken for a replaced segment's.
func TestCleanRecoversLoneIndexSwap(t *testing.T) {
	c := newCompactLog(t)
	c.run(cleanCrashScript)
	c.clean(CleanConfig{})
	dir := c.l.Dir()
	if err := c.l.Close(); err != nil {
		t.Fatal(err)
	}
	ti := filepath.Join(dir, segment.FileName(0, ".timeindex"))
	if err := os.Rename(ti, ti+suffixSwap); err != nil {
		t.Fatal(err)
	}
	l, err := Open(dir, Options{NoRecycle: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	c.l = l
	c.wantRecords(cleanCrashNew)
	if _, err := os.Stat(ti); err != nil {
		t.Fatalf("time index not restored: %v", err)
	}
}

// Scenario 30 (testCleanSegmentsWithConcurrentSegmentDeletion): retention
// (here DeleteRecordsBefore) takes a segment of the group off the list
// while the group is being copied: the pass stops, its files go, and
// the log is the one retention left.
func TestCleanStopsWhenRetentionTakesSource(t *testing.T) {
	c := newCompactLog(t)
	c.run("k0 k1 | k0 k1 | k9")
	c.l.opts.private.cleanStepHook = func(step string) {
		if step == "copying" {
			if err := c.l.DeleteRecordsBefore(2); err != nil {
				t.Error(err)
			}
		}
	}
	_, err := c.l.Clean(CleanConfig{DeleteRetention: time.Hour})
	c.l.opts.private.cleanStepHook = nil
	if !errors.Is(err, ErrCleanAborted) {
		t.Fatalf("Clean: %v, want ErrCleanAborted", err)
	}
	c.wantRecords("2:0 3:1 4:9")
	entries, _ := os.ReadDir(c.l.Dir())
	for _, e := range entries {
		if strings.Contains(e.Name(), ".cleaned") || strings.Contains(e.Name(), ".swap") {
			t.Fatalf("%s left", e.Name())
		}
	}
	c.run("| k8")
	c.clean(CleanConfig{})
	c.wantRecords("2:0 3:1 4:9 5:8")
}
