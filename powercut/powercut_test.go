package powercut

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemlog/idemlog/partition"
	"github.com/idemlog/idemlog/powercut/internal/child"
	"github.com/idemlog/idemlog/powercut/lazyfs"
)

var (
	flagTrials = flag.Int("powercut.trials", 0, "trials per sync policy (0: the CI budget, "+
		"40 under always and 4 under each other policy)")
	flagPolicy = flag.String("powercut.policy", "all", "sync policies to run: all, or a comma-separated list "+
		"of never, always, interval, bytes")
	flagTorn = flag.Float64("powercut.torn", 0.25, "fraction of cuts that are torn (keep some unsynced pages)")
	flagSeed = flag.Uint64("powercut.seed", 0, "campaign seed (0: a fresh one, printed); trials derive theirs from it")
	flagMode = flag.String("powercut.mode", "all", "write modes: all, or one of mmap, mixed, pwrite")
	// flagTrial replays one trial: its seed and settings (write mode,
	// torn cuts, who creates the data dir, kill delays) derive from the
	// campaign seed and its index; the timing of the work against the
	// kill is the machine's.
	flagTrial = flag.Int("powercut.trial", -1, "run only this trial (by index) of each policy")
	// flagParallel bounds the trials run at once (each its own disk and
	// mount): most of a trial is waiting (for the kill, for syncs through
	// FUSE), but too many at once starve the checker's bounded waits.
	flagParallel = flag.Int("powercut.parallel", 2, "trials run at once")
)

// policies are the sync policies a campaign covers, with the trials each
// gets within the CI budget.
var policies = []struct {
	name   string
	policy partition.SyncPolicy
	trials int
}{
	{"always", partition.SyncPolicy{Kind: partition.SyncAlways}, 40},
	{"never", partition.SyncPolicy{Kind: partition.SyncNever}, 4},
	{"interval", partition.SyncPolicy{Kind: partition.SyncInterval, Interval: 20 * time.Millisecond}, 4},
	{"bytes", partition.SyncPolicy{Kind: partition.SyncBytes, Bytes: 16 << 10}, 4},
}

const envRole = "POWERCUT_ROLE"

// TestPowerCutChild is the child side of TestPowerCut: the workload, a
// recovery, or a check, on the data dir it is given.
func TestPowerCutChild(t *testing.T) {
	cfg, ok, err := ConfigFromEnv()
	if !ok {
		t.Skip("child process of TestPowerCut")
	}
	if err != nil {
		t.Fatal(err)
	}
	r := &Reporter{}
	switch os.Getenv(envRole) {
	case "workload":
		err = Workload(cfg, r)
	case "recover":
		err = Recover(cfg, r)
	case "check":
		err = Check(cfg, r)
	default:
		t.Fatalf("unknown role %q", os.Getenv(envRole))
	}
	if err != nil {
		// The parent has the report; a failing exit would only add noise.
		fmt.Fprintf(os.Stderr, "powercut child: %v\n", err)
	}
}

// TestPowerCut runs the power-cut campaign: per sync policy, trials of a
// workload on the lazy filesystem, SIGKILL at a random moment, a power
// cut, sometimes a cut during recovery too, and a check of what survived
// against everything acknowledged (Ledger), twice per trial. It fails on
// every class of failure the policy promises to exclude (Promises).
func TestPowerCut(t *testing.T) {
	if testing.Short() {
		t.Skip("power-cut campaign skipped in -short mode")
	}
	seed := *flagSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	fmt.Printf("powercut: seed %d (replay with -powercut.seed %d)\n", seed, seed)
	var modes []string
	if *flagMode == "all" {
		for _, m := range Modes {
			modes = append(modes, ModeName(m))
		}
	} else {
		modes = []string{*flagMode}
	}
	for _, pc := range policies {
		if *flagPolicy != "all" && !strings.Contains(","+*flagPolicy+",", ","+pc.name+",") {
			continue
		}
		t.Run(pc.name, func(t *testing.T) {
			trials := pc.trials
			if *flagTrials > 0 {
				trials = *flagTrials
			}
			var mu sync.Mutex
			var total Counts
			slots := make(chan struct{}, max(1, *flagParallel))
			// The group returns once its parallel trials are done.
			t.Run("trials", func(t *testing.T) {
				for i := range trials {
					if *flagTrial >= 0 && i != *flagTrial {
						continue
					}
					t.Run(strconv.Itoa(i), func(t *testing.T) {
						t.Parallel()
						slots <- struct{}{}
						defer func() { <-slots }()
						rs := seed ^ uint64(i+1)*0x9e3779b97f4a7c15 ^ uint64(len(pc.name))<<56
						mode := modes[i%len(modes)]
						c, failures := runTrial(t, pc.policy, mode, rs)
						mu.Lock()
						total.Add(c)
						mu.Unlock()
						if broken := Broken(pc.policy, c); len(broken) > 0 {
							t.Errorf("trial %d (mode %s; replay: -powercut.seed %d -powercut.policy %s -powercut.trials %d -powercut.trial %d): %s",
								i, mode, seed, pc.name, trials, i, strings.Join(broken, ", "))
							for _, f := range failures[:min(len(failures), 8)] {
								t.Logf("  %s", f)
							}
						}
					})
				}
			})
			fmt.Printf("powercut: policy %s: %s\n", pc.policy, total)
		})
	}
}

// runTrial runs one trial on a fresh disk: two workload stages, each
// ended by SIGKILL and a power cut (and, half the time, a second cut while
// the engine recovers), each followed by a check.
func runTrial(t *testing.T, policy partition.SyncPolicy, mode string, seed uint64) (c Counts, failures []string) {
	rng := rand.New(rand.NewPCG(seed, 0))
	disk := lazyfs.NewDisk()
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := disk.Mount(mnt)
	if errors.Is(err, lazyfs.ErrUnavailable) {
		fmt.Fprintf(os.Stderr, "WARNING: power-cut harness skipped: %v\n", err)
		t.Skipf("WARNING: FUSE unavailable, power-cut harness not run: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = m.Unmount() }()
	mo, err := ParseMode(mode)
	if err != nil {
		t.Fatal(err)
	}
	l := NewLedger(policy)
	l.Counts.Trials = 1
	defer func() {
		st := disk.Stats()
		c.FileSyncs, c.DirSyncs, c.Renames = st.FileSyncs, st.DirSyncs, st.Renames
		c.Allocates, c.TornPages = st.Allocates, st.TornPages
	}()
	cfg := Config{Dir: filepath.Join(mnt, "data"), Policy: policy, Mode: mo,
		DurableVisibility: rng.IntN(2) == 0, Seed: seed}
	powerCut := func() {
		if err := m.Unmount(); err != nil {
			t.Fatal(err)
		}
		torn := lazyfs.Torn{}
		if rng.Float64() < *flagTorn {
			torn.Rand = rand.New(rand.NewPCG(rng.Uint64(), 1))
			l.Counts.TornCuts++
		}
		disk.Cut(torn)
		l.Counts.Cuts++
		if m, err = disk.Mount(mnt); err != nil {
			t.Fatal(err)
		}
	}
	if rng.IntN(2) == 0 {
		// Half the trials start from a data dir an operator made durable
		// (mkdir, then fsync of its parent); the others let engine.Open
		// create it, which must make it durable itself.
		if err := os.Mkdir(cfg.Dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syncDir(mnt); err != nil {
			t.Fatal(err)
		}
	}
	retries := filepath.Join(t.TempDir(), "retries")
	for stage := 1; stage <= 2; stage++ {
		l.Stage(stage)
		cfg.Stage = stage
		cfg.Retries = ""
		if stage > 1 {
			if err := l.WriteRetries(retries); err != nil {
				t.Fatal(err)
			}
			cfg.Retries = retries
		}
		run := time.Duration(100+rng.IntN(700)) * time.Millisecond
		if policy.Kind == partition.SyncInterval {
			// Long enough that part of the run lies past the interval
			// bound (intervalSlack), where nothing may be lost.
			run = time.Duration(500+rng.IntN(2500)) * time.Millisecond
		}
		if fail := runChild(t, "workload", cfg, l, run); fail != "" {
			l.Counts.OpenFailures++
			l.fail("workload could not open the data dir: %s", fail)
			return l.Counts, l.Failures
		}
		powerCut()
		if rng.IntN(2) == 0 {
			// A cut while the engine recovers, or soon after.
			if fail := runChild(t, "recover", cfg, l, time.Duration(rng.IntN(300))*time.Millisecond); fail != "" {
				l.Counts.OpenFailures++
				l.fail("recovery could not open the data dir: %s", fail)
				return l.Counts, l.Failures
			}
			powerCut()
		}
		var lines []string
		checker := child.Start(t, "TestPowerCutChild", append(cfg.Env(), envRole+"=check")...)
		timer := time.AfterFunc(2*time.Minute, checker.Kill)
		for line := range checker.Lines {
			lines = append(lines, line)
		}
		timer.Stop()
		_, _ = checker.Wait()
		if !l.Check(lines) {
			return l.Counts, l.Failures
		}
	}
	return l.Counts, l.Failures
}

// runChild runs a workload or recovery child, feeding its lines to the
// ledger, and kills it after run (counted from its "ready" line for a
// workload, from its start for a recovery). It returns the child's open
// failure, if it reported one.
func runChild(t *testing.T, role string, cfg Config, l *Ledger, run time.Duration) string {
	c := child.Start(t, "TestPowerCutChild", append(cfg.Env(), envRole+"="+role)...)
	var timer *time.Timer
	var killedAt atomic.Int64
	kill := func() {
		killedAt.Store(time.Now().UnixNano())
		c.Kill()
	}
	if role != "workload" {
		timer = time.AfterFunc(run, kill)
	}
	// A child that never gets ready (a wedged open) is killed anyway.
	guard := time.AfterFunc(time.Minute, c.Kill)
	defer guard.Stop()
	fail := ""
	for line := range c.Lines {
		if line == "ready" && timer == nil {
			timer = time.AfterFunc(run, kill)
		}
		if f := l.Feed(line); f != "" {
			fail = f
		}
	}
	if timer != nil {
		timer.Stop()
	}
	if at := killedAt.Load(); at != 0 && role == "workload" {
		l.Killed(time.Unix(0, at))
	}
	killed, err := c.Wait()
	if !killed && fail == "" {
		t.Logf("%s child exited by itself: %v", role, err)
	}
	return fail
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
