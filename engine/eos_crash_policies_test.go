package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/internal/testutil"
	"github.com/idemlog/idemlog/partition"
	"github.com/idemlog/idemlog/segment"
)

// TestEOSCrashesUnderSyncPolicies is a consume-process-produce pipeline over two
// input partitions and three output partitions, run in a child process that
// is SIGKILLed many times and restarted, under each sync policy. Kills come
// from three sources, chosen per round by a seeded generator:
//
//   - the parent, after a random delay (anywhere);
//   - the child itself, at the n-th call of the engine's clock, which the
//     engine reads before every coordinator state record (AddPartitions,
//     decision, completion, InitProducerID), before every marker (so
//     between the markers of one Commit), before every offset commit, at
//     rolls, and during Open's recovery (completion of a decided
//     transaction, orphan sweep): n is drawn small in some rounds so the
//     kill lands inside Open;
//   - the child itself at pipeline steps: after the output Sends, between
//     SendOffsets and Commit, and while a Commit's decision is pending
//     (the decidingHook knob).
//
// Checks: at every restart (after the new instance fenced the old one) the
// read_committed output holds, for each input partition p with committed
// offset c_p, exactly the inputs [0, c_p) of p, once each, in input order
// within every output partition; no acknowledged commit is lost by a kill
// and no two acknowledged commits overlap; after the last round every input
// is in the output exactly once and the committed offsets are the input
// ends.
func TestEOSCrashesUnderSyncPolicies(t *testing.T) {
	if os.Getenv(policyCrashDirEnv) != "" {
		t.Skip("in the child")
	}
	for _, pol := range []string{"never", "always", "interval=5ms", "bytes=4096"} {
		t.Run(strings.NewReplacer("=", "_").Replace(pol), func(t *testing.T) {
			policyCrashRun(t, pol)
		})
	}
}

const (
	policyCrashDirEnv    = "IDEMLOG_POLICY_CRASH_DIR"
	policyCrashSeedEnv   = "IDEMLOG_POLICY_CRASH_SEED"
	policyCrashPolicyEnv = "IDEMLOG_POLICY_CRASH_POLICY"
	policyCrashClockEnv  = "IDEMLOG_POLICY_CRASH_CLOCK_KILL" // kill at the n-th clock read (0: never)
	policyCrashStepEnv   = "IDEMLOG_POLICY_CRASH_STEP_KILL"  // 1-in-n chance of a kill at each pipeline step (0: never)
	policyCrashInParts   = 2
	policyCrashOutParts  = 3
	policyCrashRecords   = 500 // per input partition
	policyCrashTxnID     = "r12"
	policyCrashGroup     = "r12g"
	policyCrashMaxTxn    = 6 // input records per partition per transaction, at most
)

func policyCrashOptions(policy string, now func() time.Time) Options {
	sp, err := partition.ParseSyncPolicy(policy)
	if err != nil {
		panic(err)
	}
	return Options{
		Now:              now,
		MaintainInterval: -1,
		Partition: partition.Options{
			Sync:    sp,
			Segment: segment.Options{MaxBytes: 16 << 10, IndexMaxBytes: 4 << 10, IndexIntervalBytes: 512, ReserveAhead: 8 << 10},
		},
	}
}

func policyCrashValue(p, i int) []byte {
	return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, uint32(p)), uint32(i))
}

func policyCrashOutPart(p, i int) int { return (i*7 + p) % policyCrashOutParts }

// policyCrashVerify reads every output partition read_committed and the group's
// committed input offsets, and checks that output = exactly the committed
// inputs, once each, in input order per (output, input) partition pair.
func policyCrashVerify(e *Engine) ([policyCrashInParts]int64, error) {
	var committed [policyCrashInParts]int64
	tps := make([]TopicPartition, policyCrashInParts)
	for p := range tps {
		tps[p] = TopicPartition{Topic: "in", Partition: int32(p)}
	}
	offs, err := e.fetchOffsets(policyCrashGroup, tps, true)
	if err != nil {
		return committed, fmt.Errorf("fetch offsets: %w", err)
	}
	for p, tp := range tps {
		committed[p] = max(offs[tp].Offset, 0)
	}
	var seen [policyCrashInParts][]int
	for p := range seen {
		seen[p] = make([]int, policyCrashRecords)
	}
	c := e.NewConsumer("", ReadCommitted)
	for o := range policyCrashOutParts {
		op, err := e.Partition("out", o)
		if err != nil {
			return committed, err
		}
		if err := c.Assign(op); err != nil {
			return committed, err
		}
		if lso, hw := op.LastStableOffset(), op.log.HighWatermark(); lso != hw {
			return committed, fmt.Errorf("out-%d: last stable offset %d, high watermark %d with no live transaction", o, lso, hw)
		}
		prev := [policyCrashInParts]int{-1, -1}
		for c.Position(op) < op.LastStableOffset() {
			pos := c.Position(op)
			_, err := c.Poll(op, 1<<16, func(r *batch.Record) error {
				if len(r.Value) != 8 {
					return fmt.Errorf("out-%d at %d: value %x", o, r.Offset, r.Value)
				}
				p, i := int(binary.BigEndian.Uint32(r.Value)), int(binary.BigEndian.Uint32(r.Value[4:]))
				if p >= policyCrashInParts || i >= policyCrashRecords || policyCrashOutPart(p, i) != o {
					return fmt.Errorf("out-%d at %d: input %d/%d does not belong here", o, r.Offset, p, i)
				}
				if seen[p][i]++; seen[p][i] > 1 {
					return fmt.Errorf("out-%d at %d: input %d/%d again: duplicated", o, r.Offset, p, i)
				}
				if i <= prev[p] {
					return fmt.Errorf("out-%d at %d: input %d/%d after %d/%d: out of order", o, r.Offset, p, i, p, prev[p])
				}
				prev[p] = i
				return nil
			})
			if err != nil {
				return committed, err
			}
			if c.Position(op) <= pos {
				return committed, fmt.Errorf("out-%d: no progress at %d", o, pos)
			}
		}
	}
	for p := range seen {
		for i, n := range seen[p] {
			if want := int64(i) < committed[p]; want != (n == 1) {
				return committed, fmt.Errorf("input %d/%d is in the committed output %d times, but the committed offset of in-%d is %d", p, i, n, p, committed[p])
			}
		}
	}
	return committed, nil
}

// TestEOSCrashesUnderSyncPoliciesChild is the child of TestEOSCrashesUnderSyncPolicies. Lines:
//
//	ready
//	start c0 c1            (committed offsets after the first fence, verified)
//	commit inst f0 t0 f1 t1 (acknowledged commit of inputs [f_p, t_p))
//	done
//	error ...
func TestEOSCrashesUnderSyncPoliciesChild(t *testing.T) {
	dir := os.Getenv(policyCrashDirEnv)
	if dir == "" {
		t.Skip("child process of TestEOSCrashesUnderSyncPolicies")
	}
	rep := testutil.NewReporter()
	say, fail := rep.Say, rep.Fail
	die := func() { _ = syscall.Kill(os.Getpid(), syscall.SIGKILL); select {} }
	seed, _ := strconv.ParseUint(os.Getenv(policyCrashSeedEnv), 10, 64)
	clockKill, _ := strconv.ParseInt(os.Getenv(policyCrashClockEnv), 10, 64)
	stepKill, _ := strconv.Atoi(os.Getenv(policyCrashStepEnv))
	var clock atomic.Int64
	now := func() time.Time {
		if n := clock.Add(1); clockKill > 0 && n == clockKill {
			die()
		}
		return time.Now()
	}
	var stepMu sync.Mutex
	stepRng := rand.New(rand.NewPCG(seed, 99))
	step := func() {
		if stepKill <= 0 {
			return
		}
		stepMu.Lock()
		k := stepRng.IntN(stepKill) == 0
		stepMu.Unlock()
		if k {
			die()
		}
	}
	opts := policyCrashOptions(os.Getenv(policyCrashPolicyEnv), now)
	opts.private.decidingHook = func(string) { step() }
	e, err := Open(dir, opts)
	if err != nil {
		fail("open: %v", err)
	}
	var ins [policyCrashInParts]*Partition
	var outs [policyCrashOutParts]*Partition
	for p := range ins {
		if ins[p], err = e.Partition("in", p); err != nil {
			fail("partition: %v", err)
		}
	}
	for o := range outs {
		if outs[o], err = e.Partition("out", o); err != nil {
			fail("partition: %v", err)
		}
	}
	say("ready")

	initTP := func() *TransactionalProducer {
		deadline := time.Now().Add(20 * time.Second)
		for {
			tp, err := e.NewTransactionalProducer(policyCrashTxnID, time.Minute)
			if err == nil {
				return tp
			}
			if !eosFenced(err) || time.Now().After(deadline) {
				fail("init: %v", err)
			}
			time.Sleep(time.Millisecond)
		}
	}
	first := initTP()
	committed, err := policyCrashVerify(e)
	if err != nil {
		fail("after restart: %v", err)
	}
	say("start %d %d", committed[0], committed[1])

	errEnough := errors.New("enough")
	// process runs one transaction: up to k records of each input
	// partition from the group's committed offsets.
	process := func(rng *rand.Rand, tp *TransactionalProducer, k int, abort bool) (from, to [policyCrashInParts]int64, op string, err error, done bool) {
		c := e.NewConsumer(policyCrashGroup, ReadCommitted)
		deadline := time.Now().Add(20 * time.Second)
		for p := range ins {
			for {
				err := c.Assign(ins[p])
				if err == nil {
					break
				}
				if !errors.Is(err, ErrUnstableOffsetCommit) || time.Now().After(deadline) {
					fail("assign: %v", err)
				}
				time.Sleep(time.Millisecond)
			}
			from[p] = c.Position(ins[p])
			to[p] = from[p]
		}
		if from[0] >= policyCrashRecords && from[1] >= policyCrashRecords {
			return from, to, "", nil, true
		}
		var blds [policyCrashOutParts]*batch.Builder
		for p := range ins {
			n := 0
			for n < k && to[p] < policyCrashRecords {
				_, err := c.Poll(ins[p], 1<<10, func(r *batch.Record) error {
					if n == k {
						return errEnough
					}
					if len(r.Value) != 8 || int(binary.BigEndian.Uint32(r.Value)) != p || int64(binary.BigEndian.Uint32(r.Value[4:])) != r.Offset {
						return fmt.Errorf("input %d at %d: value %x", p, r.Offset, r.Value)
					}
					if r.Offset != to[p] {
						return fmt.Errorf("input %d: record at %d, expected %d", p, r.Offset, to[p])
					}
					i := int(r.Offset)
					o := policyCrashOutPart(p, i)
					if blds[o] == nil {
						blds[o] = batch.NewBuilder(batch.CodecNone)
					}
					blds[o].Append(r.Timestamp, nil, policyCrashValue(p, i), nil)
					to[p]++
					n++
					return nil
				})
				if err != nil && err != errEnough {
					fail("poll: %v", err)
				}
				if err == errEnough {
					break
				}
			}
		}
		for o, bld := range blds {
			if bld == nil {
				continue
			}
			if _, err := tp.Send(outs[o], bld); err != nil {
				return from, to, "send", err, false
			}
		}
		step()
		offs := map[TopicPartition]OffsetAndMetadata{}
		for p := range ins {
			offs[TopicPartition{Topic: "in", Partition: int32(p)}] = OffsetAndMetadata{Offset: to[p]}
		}
		if err := tp.SendOffsets(policyCrashGroup, offs); err != nil {
			return from, to, "sendoffsets", err, false
		}
		step()
		if abort {
			return from, to, "abort", tp.Abort(), false
		}
		return from, to, "commit", tp.Commit(), false
	}

	var wg sync.WaitGroup
	for inst := range 2 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(inst)))
			var tp *TransactionalProducer
			if inst == 0 {
				tp = first
			} else {
				time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
			}
			for {
				if tp == nil {
					tp = initTP()
				}
				abort := rng.IntN(6) == 0
				from, to, op, err, done := process(rng, tp, 1+rng.IntN(policyCrashMaxTxn), abort)
				switch {
				case done:
					return
				case err == nil:
					if op == "commit" {
						say("commit %d %d %d %d %d", inst, from[0], to[0], from[1], to[1])
					}
					time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
				case eosFenced(err):
					tp = nil
					time.Sleep(time.Duration(1+rng.IntN(3000)) * time.Microsecond)
				default:
					fail("instance %d: %s: %v", inst, op, err)
				}
			}
		})
	}
	wg.Wait()
	if err := e.Close(); err != nil {
		fail("close: %v", err)
	}
	say("done")
}

type policyCrashState struct {
	acked            [policyCrashInParts][]bool
	durable, ackEnd  [policyCrashInParts]int64
	kills, commits   int
	starts, finished int
}

func policyCrashRun(t *testing.T, policy string) {
	rounds := 12
	dir := t.TempDir()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 12))

	e := openEngine(t, dir, policyCrashOptions(policy, nil))
	if err := e.CreateTopic("in", policyCrashInParts); err != nil {
		t.Fatal(err)
	}
	if err := e.CreateTopic("out", policyCrashOutParts); err != nil {
		t.Fatal(err)
	}
	for p := range policyCrashInParts {
		in, _ := e.Partition("in", p)
		for i := 0; i < policyCrashRecords; {
			b := batch.NewBuilder(batch.CodecNone)
			for n := 1 + (i+p)%3; n > 0 && i < policyCrashRecords; n-- { // batches of 1-3 records
				b.Append(time.Now().UnixMilli(), nil, policyCrashValue(p, i), nil)
				i++
			}
			v, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := in.Append(append([]byte(nil), v...)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	st := &policyCrashState{}
	for p := range st.acked {
		st.acked[p] = make([]bool, policyCrashRecords)
	}
	start := time.Now()
	for round := 1; round <= rounds; round++ {
		var env []string
		var delay time.Duration
		if round < rounds {
			switch rng.IntN(3) {
			case 0:
				delay = time.Duration(20+rng.IntN(150)) * time.Millisecond
			case 1:
				n := 1 + rng.IntN(600)
				if rng.IntN(3) == 0 {
					n = 1 + rng.IntN(12) // inside Open's recovery
				}
				env = append(env, policyCrashClockEnv+"="+strconv.Itoa(n))
				delay = time.Second
			default:
				env = append(env, policyCrashStepEnv+"="+strconv.Itoa(10+rng.IntN(60)))
				delay = time.Second
			}
		}
		env = append(env, policyCrashDirEnv+"="+dir, policyCrashSeedEnv+"="+strconv.FormatUint(rng.Uint64(), 10),
			policyCrashPolicyEnv+"="+policy, "GORACE=halt_on_error=1")
		st.runChild(t, round, env, delay)
	}
	t.Logf("%s: %d rounds, %d killed, input consumed in round %d, %d commits acknowledged, %d starts, %v",
		policy, rounds, st.kills, st.finished, st.commits, st.starts, time.Since(start).Round(time.Millisecond))

	e = openEngine(t, dir, policyCrashOptions(policy, nil))
	defer e.Close()
	committed, err := policyCrashVerify(e)
	if err != nil {
		t.Fatal(err)
	}
	if committed != [policyCrashInParts]int64{policyCrashRecords, policyCrashRecords} {
		t.Fatalf("committed input offsets %v, want %d each", committed, policyCrashRecords)
	}
}

func (st *policyCrashState) runChild(t *testing.T, round int, env []string, delay time.Duration) {
	t.Helper()
	child := testutil.StartChild(t, "TestEOSCrashesUnderSyncPoliciesChild", env...)
	fatal := func(format string, args ...any) {
		t.Helper()
		child.Abort()
		t.Fatalf("round %d (%v): "+format, append([]any{round, env[:len(env)-4]}, args...)...)
	}
	done := false
	res := child.Watch(t, fmt.Sprintf("round %d (%v)", round, env[:len(env)-4]), testutil.Watch{KillAfter: delay, Line: func(f []string) error {
		line := strings.Join(f, " ")
		num := func(i int) int64 {
			if i >= len(f) {
				fatal("bad child line %q", line)
			}
			n, err := strconv.ParseInt(f[i], 10, 64)
			if err != nil {
				fatal("bad child line %q", line)
			}
			return n
		}
		switch f[0] {
		case "start":
			st.starts++
			for p := range policyCrashInParts {
				if c := num(1 + p); c < st.durable[p] || c > policyCrashRecords {
					fatal("restart finds in-%d committed at %d; commits up to %d were acknowledged before the kill", p, c, st.durable[p])
				}
			}
		case "commit":
			for p := range policyCrashInParts {
				from, to := num(2+2*p), num(3+2*p)
				if from < st.durable[p] || to < from || to > policyCrashRecords {
					fatal("commit of in-%d [%d, %d) acknowledged; acknowledged before the kill: up to %d", p, from, to, st.durable[p])
				}
				for i := from; i < to; i++ {
					if st.acked[p][i] {
						fatal("commit of in-%d [%d, %d) acknowledged, but %d was in an earlier acknowledged commit", p, from, to, i)
					}
					st.acked[p][i] = true
				}
				st.ackEnd[p] = max(st.ackEnd[p], to)
			}
			st.commits++
		case "done":
			done = true
			if st.finished == 0 {
				st.finished = round
			}
		}
		return nil
	}})
	switch {
	case res.SIGKILLed && !done:
		st.kills++
	case done && (res.Err == nil || res.SIGKILLed):
	default:
		t.Fatalf("round %d: child exited (%v) without finishing", round, res.Err)
	}
	st.durable = st.ackEnd
}
