package partition

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/internal/testutil"
	"github.com/idemlog/idemlog/segment"
)

var (
	crashRounds        = flag.Int("crash.rounds", 50, "rounds of the SIGKILL crash test")
	crashRecycleRounds = flag.Int("crash.recycle.rounds", 20, "rounds of the SIGKILL crash test with retention recycling segments")
)

const (
	crashDirEnv    = "IDEMLOG_CRASH_DIR"
	crashRetainEnv = "IDEMLOG_CRASH_RETAIN"
)

// crashOptions are the logs' options; with retain, retention recycles
// segments (TestCrashKillRecycling).
func crashOptions(retain bool) Options {
	o := Options{
		Sync:    SyncPolicy{Kind: SyncAlways},
		Segment: segment.Options{MaxBytes: 64 << 10, IndexIntervalBytes: 1024, IndexMaxBytes: 8 << 10, ReserveAhead: 16 << 10},
	}
	if retain {
		// Retention keeps about four segments, so nearly every roll
		// takes a recycled file (segment.Recycle), which needs segments
		// of large batches (crashBatch).
		o.Segment.MaxBytes = 1 << 20
		o.Segment.IndexIntervalBytes = 64 << 10
		o.RetentionAge = -1
		o.RetentionBytes = 4 << 20
	}
	return o
}

// crashBatch is the batch with identity id: the parent regenerates it to
// check what the child acknowledged, byte for byte.
func crashBatch(t testing.TB, id int, retain bool) []byte {
	if retain {
		return makeBatch(t, id, 1+id%3, 30000+id%300*100, int64(id))
	}
	return makeBatch(t, id, 1+id%3, 20+id%300, int64(id))
}

// TestCrashChild is the child side: it appends under SyncAlways from
// several goroutines and prints every acknowledgement, until killed.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("child process of TestCrashKill")
	}
	round := 0
	fmt.Sscan(os.Getenv("IDEMLOG_CRASH_ROUND"), &round)
	rep := testutil.NewReporter()
	retain := os.Getenv(crashRetainEnv) != ""
	l, err := Open(dir, crashOptions(retain))
	if err != nil {
		rep.Fail("%v", err)
	}
	rep.Say("ready")
	if retain {
		go func() {
			var reported int64
			for {
				if _, err := l.ApplyRetention(); err != nil {
					rep.Fail("%v", err)
				}
				if n := l.Recycled(); n > reported {
					reported = n
					rep.Say("recycled %d", n)
				}
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; ; k++ {
				id := round*1_000_000 + w*100_000 + k
				res, err := l.Append(crashBatch(t, id, retain))
				if err != nil {
					rep.Fail("%v", err)
				}
				rep.Say("ack %d %d %d", res.BaseOffset, res.LastOffset, id)
			}
		}()
	}
	wg.Wait()
}

type ack struct {
	base, last int64
	id         int
}

// TestCrashKill really kills a process that appends under SyncAlways, at
// random moments, then checks on reopen that every acknowledged batch is
// there byte for byte, offsets are dense, and the indexes agree with the
// log. Each round starts from the state the previous crash left.
func TestCrashKill(t *testing.T) {
	t.Parallel()
	if os.Getenv(crashDirEnv) != "" {
		t.Skip("in the child")
	}
	rounds := *crashRounds
	if testing.Short() {
		rounds = 5
	}
	crashKill(t, rounds, false)
}

// TestCrashKillRecycling is TestCrashKill with retention deleting
// segments as the child appends, so rolls take recycled files whose stale
// batches lie past the data at every kill (segment.Recycle). Acknowledged
// batches below the log start are retention's to drop.
func TestCrashKillRecycling(t *testing.T) {
	if os.Getenv(crashDirEnv) != "" {
		t.Skip("in the child")
	}
	if !segment.ZeroFillSupported {
		t.Skip("recycling follows zero fills, Linux only")
	}
	t.Parallel()
	rounds := *crashRecycleRounds
	if testing.Short() {
		rounds = 5
	}
	if recycled := crashKill(t, rounds, true); recycled == 0 {
		t.Fatal("no segment file was recycled in any round")
	}
}

// crashKill runs the rounds (with retain, retention recycling segments)
// and returns the recycled files the children reported.
func crashKill(t *testing.T, rounds int, retain bool) (recycled int) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	var acked []ack
	for round := 1; round <= rounds; round++ {
		acks, n := runCrashChild(t, dir, round, retain, time.Duration(5+rng.IntN(120))*time.Millisecond)
		acked = append(acked, acks...)
		recycled += n
		l, err := Open(dir, crashOptions(retain))
		if err != nil {
			t.Fatalf("round %d: reopen: %v", round, err)
		}
		checkAcked(t, l, acked, round, retain)
		if err := l.Close(); err != nil {
			t.Fatalf("round %d: close: %v", round, err)
		}
		verifyDir(t, dir)
		if round%2 == 0 {
			// Every other round the next child starts from an unclean state
			// that recovery already handled once: remove the marker again.
			os.Remove(filepath.Join(dir, cleanShutdownFile))
		}
	}
	t.Logf("%d rounds, %d acknowledged batches checked, %d segment files recycled", rounds, len(acked), recycled)
	return recycled
}

// crashMinAcks is how many acknowledgements a child gives before its
// kill; crashRetainMinAcks with retention recycling, whose child must
// write past the retained bytes and roll again within its life (about
// 90 KiB a batch, 1 MiB segments) for a recycled file to be taken: a
// recycled file is handed over in memory, so a kill loses it.
const (
	crashMinAcks       = 8
	crashRetainMinAcks = 32
)

func runCrashChild(t *testing.T, dir string, round int, retain bool, after time.Duration) (acks []ack, recycled int) {
	env := []string{crashDirEnv + "=" + dir, fmt.Sprintf("IDEMLOG_CRASH_ROUND=%d", round)}
	if retain {
		env = append(env, crashRetainEnv+"=1")
	}
	minAcks := crashMinAcks
	if retain {
		minAcks = crashRetainMinAcks
	}
	child := testutil.StartChild(t, "TestCrashChild", env...)
	res := child.Watch(t, fmt.Sprintf("round %d", round), testutil.Watch{
		KillAfter: after,
		// On a loaded machine the delay can pass before the child
		// appended anything: retention, and so recycling, then never gets
		// its turn in any round.
		KillWhen: func() bool { return len(acks) >= minAcks },
		Guard:    5 * time.Minute,
		Line: func(f []string) error {
			line := strings.Join(f, " ")
			switch f[0] {
			case "ack":
				var a ack
				if _, err := fmt.Sscanf(line, "ack %d %d %d", &a.base, &a.last, &a.id); err != nil {
					return fmt.Errorf("bad child line %q", line)
				}
				acks = append(acks, a)
			case "recycled":
				fmt.Sscanf(line, "recycled %d", &recycled)
			}
			return nil
		},
	})
	if !res.Killed {
		t.Fatalf("round %d: child did not die by the parent's SIGKILL: %v", round, res.Err)
	}
	return acks, recycled
}

func checkAcked(t *testing.T, l *Log, acked []ack, round int, retain bool) {
	t.Helper()
	all := readAll(t, l)
	byBase := make(map[int64]batch.Batch, len(all))
	next := l.LogStartOffset()
	for _, b := range all {
		if b.BaseOffset() != next {
			t.Fatalf("round %d: offsets not dense: batch at %d, expected %d", round, b.BaseOffset(), next)
		}
		byBase[b.BaseOffset()] = b
		next = b.NextOffset()
	}
	if next != l.LogEndOffset() {
		t.Fatalf("round %d: batches end at %d, log end %d", round, next, l.LogEndOffset())
	}
	for _, a := range acked {
		if a.base < l.LogStartOffset() {
			continue // deleted by retention
		}
		b, ok := byBase[a.base]
		if !ok {
			t.Fatalf("round %d: acknowledged batch %d at offset %d lost", round, a.id, a.base)
		}
		sameBatch(t, b, crashBatch(t, a.id, retain), a.base)
		if b.LastOffset() != a.last {
			t.Fatalf("round %d: batch %d last offset %d, acknowledged %d", round, a.id, b.LastOffset(), a.last)
		}
	}
}

// verifyDir runs the offline verifier on every segment of a closed log.
func verifyDir(t *testing.T, dir string) {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, p := range logs {
		r, err := segment.VerifyFile(p, 0)
		if err != nil {
			t.Fatalf("verify: %v", err)
		}
		if r.ZeroTail != 0 || r.Gaps != 0 {
			t.Fatalf("verify %s after clean close: zero tail %d, gaps %d", p, r.ZeroTail, r.Gaps)
		}
	}
}

// TestRecoverBatchOverLoweredLimit: a batch written under a larger
// MaxBatchSize survives an unclean reopen with a smaller one; recovery
// must not cut it (and drop what follows).
func TestRecoverBatchOverLoweredLimit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	big := Options{MaxBatchSize: 1 << 20}
	l, err := Open(dir, big)
	if err != nil {
		t.Fatal(err)
	}
	for i, size := range []int{100, 50_000, 100} {
		if _, err := l.Append(makeBatch(t, i, 1, size, int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	l.Kill() // unclean: the next open scans
	small := Options{MaxBatchSize: 10_000}
	l, err = Open(dir, small)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.LogEndOffset() != 3 {
		t.Fatalf("log end %d after an unclean reopen with a lower MaxBatchSize, want 3", l.LogEndOffset())
	}
}
