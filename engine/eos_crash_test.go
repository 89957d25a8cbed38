package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/internal/testutil"
	"github.com/idemlog/idemlog/producer"
)

var eosCrashRounds = flag.Int("crash.eos.rounds", 20, "rounds of TestEOSPipelineCrashes")

const (
	eosCrashDirEnv  = "IDEMLOG_ENGINE_EOS_CRASH_DIR"
	eosCrashSeedEnv = "IDEMLOG_ENGINE_EOS_CRASH_SEED"
	eosCrashRecords = 8000
	eosCrashTxnID   = "pipeline"
	eosCrashGroup   = "g"
	eosCrashMaxTxn  = 50 // input records per transaction, at most
	eosCrashPauseMs = 20 // pause after a transaction, at most
)

var eosCrashIn = TopicPartition{Topic: "in", Partition: 0}

// eosFenced reports whether err tells an instance that another one with
// its transactional id took over (or is ending a transaction): it then
// re-initializes, as a restarted instance would.
func eosFenced(err error) bool {
	return errors.Is(err, ErrProducerFenced) || errors.Is(err, producer.ErrInvalidProducerEpoch) ||
		errors.Is(err, ErrInvalidProducerIDMapping) || errors.Is(err, ErrConcurrentTransactions)
}

// TestEOSPipelineCrashesChild is the child side of TestEOSPipelineCrashes:
// it opens the engine (recovering after the previous kill) and runs two
// instances of the consume-process-produce pipeline with the same
// transactional id, as goroutines sharing the engine (one process owns a
// data dir), until the input is consumed or the parent kills it. Lines:
//
//	ready
//	start inst off        (first committed input offset the instance saw)
//	commit inst from to   (a transaction of input [from, to) committed)
//	abort inst from to    (one of [from, to) aborted on purpose)
//	fenced inst op        (op failed as fenced; the instance re-initializes)
//	done
//	error ...
func TestEOSPipelineCrashesChild(t *testing.T) {
	dir := os.Getenv(eosCrashDirEnv)
	if dir == "" {
		t.Skip("child process of TestEOSPipelineCrashes")
	}
	rep := testutil.NewReporter()
	say, fail := rep.Say, rep.Fail
	seed, _ := strconv.ParseUint(os.Getenv(eosCrashSeedEnv), 10, 64)
	e, err := Open(dir, crashEngineOptions())
	if err != nil {
		fail("open: %v", err)
	}
	in, err := e.Partition("in", 0)
	if err != nil {
		fail("partition: %v", err)
	}
	var outs [2]*Partition
	for i := range outs {
		if outs[i], err = e.Partition("out", i); err != nil {
			fail("partition: %v", err)
		}
	}
	end := in.log.HighWatermark()
	say("ready")

	// fetch returns the group's committed input offset, waiting while a
	// transactional commit is pending.
	fetch := func(inst int) int64 {
		deadline := time.Now().Add(20 * time.Second)
		for {
			offs, err := e.fetchOffsets(eosCrashGroup, []TopicPartition{eosCrashIn}, true)
			if err == nil {
				return max(offs[eosCrashIn].Offset, 0)
			}
			if !errors.Is(err, ErrUnstableOffsetCommit) || time.Now().After(deadline) {
				fail("instance %d: fetch offsets: %v", inst, err)
			}
			time.Sleep(time.Millisecond)
		}
	}
	// process runs one transaction over input [from, from+k) (or less at
	// the end); it returns the input offset reached, the failed step and
	// its error.
	process := func(rng *rand.Rand, tp *TransactionalProducer, from int64, k int, abort bool) (int64, string, error) {
		c, err := in.log.Read(from, 1<<20)
		if err != nil {
			fail("read input at %d: %v", from, err)
		}
		var d batch.Decoder
		var blds [2]*batch.Builder
		next := from
		for data := c.Data; len(data) > 0 && next < from+int64(k); {
			sz, err := batch.Size(data)
			if err != nil {
				fail("input batch at %d: %v", next, err)
			}
			b := batch.Batch(data[:sz])
			data = data[sz:]
			if b.BaseOffset() != next {
				fail("input batch at %d, expected %d", b.BaseOffset(), next)
			}
			it, err := d.Records(b)
			if err != nil {
				fail("input batch at %d: %v", next, err)
			}
			var r batch.Record
			for it.Next(&r) {
				if len(r.Value) != 4 || int64(binary.BigEndian.Uint32(r.Value)) != r.Offset {
					fail("input record at %d: value %x", r.Offset, r.Value)
				}
				i := binary.BigEndian.Uint32(r.Value)
				if blds[i%2] == nil {
					blds[i%2] = batch.NewBuilder(batch.CodecNone)
				}
				blds[i%2].Append(r.Timestamp, nil, binary.BigEndian.AppendUint32(nil, i), nil)
			}
			next = b.NextOffset()
		}
		c.Release()
		if next == from {
			fail("no input at %d (end %d)", from, end)
		}
		for p, bld := range blds {
			if bld == nil {
				continue
			}
			if _, err := tp.Send(outs[p], bld); err != nil {
				return next, "send", err
			}
			if rng.IntN(8) == 0 {
				time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
			}
		}
		if err := tp.SendOffsets(eosCrashGroup, map[TopicPartition]OffsetAndMetadata{eosCrashIn: {Offset: next}}); err != nil {
			return next, "sendoffsets", err
		}
		if abort {
			return next, "abort", tp.Abort()
		}
		return next, "commit", tp.Commit()
	}

	var wg sync.WaitGroup
	for inst := range 2 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(inst)))
			var tp *TransactionalProducer
			started := false
			for {
				for tp == nil {
					var err error
					if tp, err = e.NewTransactionalProducer(eosCrashTxnID, time.Minute); err != nil {
						if !eosFenced(err) {
							fail("instance %d: init: %v", inst, err)
						}
						time.Sleep(time.Millisecond)
					}
				}
				from := fetch(inst)
				if !started {
					say("start %d %d", inst, from)
					started = true
				}
				if from >= end {
					return
				}
				abort := rng.IntN(4) == 0
				to, op, err := process(rng, tp, from, 1+rng.IntN(eosCrashMaxTxn), abort)
				switch {
				case err == nil:
					say("%s %d %d %d", op, inst, from, to)
					// The pipeline's pace (a poll interval): the input
					// lasts over several kills.
					time.Sleep(time.Duration(rng.IntN(eosCrashPauseMs*1000)) * time.Microsecond)
				case eosFenced(err):
					say("fenced %d %s", inst, op)
					tp = nil
					// Back off, so that the instances do not keep fencing
					// each other without progress.
					time.Sleep(time.Duration(1+rng.IntN(5000)) * time.Microsecond)
				default:
					fail("instance %d: %s of input [%d, %d): %v", inst, op, from, to, err)
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

// eosCrashState is what the parent learned from the children's lines.
type eosCrashState struct {
	// acked[i]: input record i is in a transaction whose commit was
	// acknowledged.
	acked []bool
	// durable is the end of the acknowledged commits of earlier rounds:
	// the committed offset no restart may go below.
	durable, ackedEnd                           int64
	commits, aborts, fenced, starts, kills, ran int
	// finished is the first round whose child reached the input's end.
	finished int
}

// TestEOSPipelineCrashes runs an exactly-once consume-process-produce
// pipeline in a child process that it SIGKILLs at random moments and
// restarts. The child runs two instances with the same transactional id
// (the older is a zombie until fenced, then re-initializes and goes on
// from the group's committed offset); each transaction reads 1..50 input
// records from the committed offset, writes each to an output partition,
// sends the new input offset and commits, or aborts one in four. After
// the last child runs to the end of the input, read_committed output must
// hold every input record exactly once, in order per partition, and the
// committed offset must be the input's end. On the way, no acknowledged
// commit may be lost by a kill or cover a record another acknowledged
// commit covered.
func TestEOSPipelineCrashes(t *testing.T) {
	if os.Getenv(eosCrashDirEnv) != "" {
		t.Skip("in the child")
	}
	rounds := *eosCrashRounds
	if testing.Short() || crashRaceEnabled() {
		rounds = min(rounds, 6)
	}
	rounds = max(rounds, 1)
	dir := t.TempDir()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))

	e := openEngine(t, dir, crashEngineOptions())
	if err := e.CreateTopic("in", 1); err != nil {
		t.Fatal(err)
	}
	if err := e.CreateTopic("out", 2); err != nil {
		t.Fatal(err)
	}
	in, _ := e.Partition("in", 0)
	for i := range eosCrashRecords {
		b := batch.NewBuilder(batch.CodecNone)
		b.Append(time.Now().UnixMilli(), nil, binary.BigEndian.AppendUint32(nil, uint32(i)), nil)
		v, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := in.Append(bytes.Clone(v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	st := &eosCrashState{acked: make([]bool, eosCrashRecords)}
	start := time.Now()
	for round := 1; round <= rounds; round++ {
		var delay time.Duration // the last child runs to the end
		if round < rounds {
			delay = time.Duration(20+rng.IntN(281)) * time.Millisecond
		}
		st.runChild(t, dir, round, rng.Uint64(), delay)
	}
	t.Logf("%d rounds (%d killed, input consumed in round %d) in %v: %d transactions committed, %d aborted, %d fenced operations; %d instance starts",
		rounds, st.kills, st.finished, time.Since(start).Round(time.Millisecond), st.commits, st.aborts, st.fenced, st.starts)
	st.check(t, dir)
}

// runChild runs one child; with delay > 0 it kills it that long after it
// is ready (unless it finishes first), else it must finish.
func (st *eosCrashState) runChild(t *testing.T, dir string, round int, seed uint64, delay time.Duration) {
	t.Helper()
	child := testutil.StartChild(t, "TestEOSPipelineCrashesChild", eosCrashDirEnv+"="+dir,
		eosCrashSeedEnv+"="+strconv.FormatUint(seed, 10),
		"GORACE=halt_on_error=1")
	fatal := func(format string, args ...any) {
		t.Helper()
		child.Abort()
		t.Fatalf("round %d: "+format, append([]any{round}, args...)...)
	}
	done := false
	st.ran++
	res := child.Watch(t, fmt.Sprintf("round %d", round), testutil.Watch{KillAfter: delay, Guard: 2 * time.Minute, Line: func(f []string) error {
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
			if off := num(2); off < st.durable || off > eosCrashRecords {
				fatal("instance %d starts at committed offset %d; commits up to %d were acknowledged before the last kill", num(1), off, st.durable)
			}
		case "commit":
			from, to := num(2), num(3)
			if from < st.durable || to <= from || to > eosCrashRecords {
				fatal("commit of input [%d, %d) acknowledged; acknowledged before the last kill: up to %d", from, to, st.durable)
			}
			for i := from; i < to; i++ {
				if st.acked[i] {
					fatal("commit of input [%d, %d) acknowledged, but record %d was in an earlier acknowledged commit: processed twice", from, to, i)
				}
				st.acked[i] = true
			}
			st.ackedEnd = max(st.ackedEnd, to)
			st.commits++
		case "abort":
			num(3)
			st.aborts++
		case "fenced":
			st.fenced++
		case "done":
			done = true
			if st.finished == 0 {
				st.finished = round
			}
		}
		return nil
	}})
	switch {
	case res.Killed && !done:
		st.kills++
	case done && (res.Err == nil || res.Killed): // killed, if at all, after the end
	default:
		t.Fatalf("round %d: child exited (%v) without finishing", round, res.Err)
	}
	st.durable = st.ackedEnd
}

// check opens the engine after the last child and reads the output under
// read_committed.
func (st *eosCrashState) check(t *testing.T, dir string) {
	t.Helper()
	e := openEngine(t, dir, crashEngineOptions())
	defer func() {
		if err := e.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	seen := make([]int, eosCrashRecords)
	c := e.NewConsumer("", ReadCommitted)
	for idx := range 2 {
		p, err := e.Partition("out", idx)
		if err != nil {
			t.Fatal(err)
		}
		if lso, hw := p.LastStableOffset(), p.log.HighWatermark(); lso != hw {
			t.Errorf("out-%d: last stable offset %d, high watermark %d: a transaction left open", idx, lso, hw)
		}
		if err := c.Assign(p); err != nil {
			t.Fatal(err)
		}
		prev, n := int64(-1), 0
		for c.Position(p) < p.LastStableOffset() {
			pos := c.Position(p)
			_, err := c.Poll(p, 1<<16, func(r *batch.Record) error {
				if len(r.Value) != 4 {
					return fmt.Errorf("record at %d: value %x", r.Offset, r.Value)
				}
				v := int64(binary.BigEndian.Uint32(r.Value))
				if v >= eosCrashRecords || v%2 != int64(idx) {
					return fmt.Errorf("record at %d: input record %d", r.Offset, v)
				}
				if seen[v]++; seen[v] > 1 {
					return fmt.Errorf("record at %d: input record %d again: processed twice", r.Offset, v)
				}
				if v <= prev {
					return fmt.Errorf("record at %d: input record %d after %d", r.Offset, v, prev)
				}
				prev = v
				n++
				return nil
			})
			if err != nil {
				t.Fatalf("out-%d: %v", idx, err)
			}
			if c.Position(p) <= pos {
				t.Fatalf("out-%d: poll at %d made no progress (last stable offset %d)", idx, pos, p.LastStableOffset())
			}
		}
		t.Logf("out-%d: %d committed records, log end %d", idx, n, p.log.LogEndOffset())
	}
	for i, n := range seen {
		if n != 1 {
			t.Fatalf("input record %d is in the committed output %d times (acknowledged committed: %v)", i, n, st.acked[i])
		}
	}
	offs, err := e.fetchOffsets(eosCrashGroup, []TopicPartition{eosCrashIn}, true)
	if err != nil || offs[eosCrashIn].Offset != eosCrashRecords {
		t.Fatalf("committed input offset %v, %v; want %d", offs, err, eosCrashRecords)
	}
}
