package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/internal/testutil"
	"github.com/idemlog/idemlog/partition"
	"github.com/idemlog/idemlog/producer"
	"github.com/idemlog/idemlog/segment"
)

var crashProducerRounds = flag.Int("crash.producer.rounds", 50, "rounds of TestCrashRetryingProducers")

const (
	crashProdDirEnv  = "IDEMLOG_ENGINE_CRASH_DIR"
	crashProdNextEnv = "IDEMLOG_ENGINE_CRASH_NEXT"
	crashProdSeedEnv = "IDEMLOG_ENGINE_CRASH_SEED"
	crashProdTopic   = "crash"
	crashProducers   = 4 // producer ids 1..crashProducers, epoch 0
)

func crashEngineOptions() Options {
	return Options{Partition: partition.Options{
		Sync:    partition.SyncPolicy{Kind: partition.SyncAlways},
		Segment: segment.Options{MaxBytes: 64 << 10, IndexMaxBytes: 8 << 10, IndexIntervalBytes: 1024, ReserveAhead: 16 << 10},
	}}
}

// crashCount is the number of records in batch k of producer p.
func crashCount(p, k int) int { return 1 + (p+k)%3 }

// crashSeq is the base sequence of batch k of producer p.
func crashSeq(p, k int) int32 {
	s := 0
	for j := range k {
		s += crashCount(p, j)
	}
	return int32(s)
}

const crashValueHeader = 12

// crashValue is record i of batch k of producer p: (p, k, i) and a padding
// derived from them, so that segments roll often and the parent can check
// every byte.
func crashValue(p, k, i int) []byte {
	v := make([]byte, crashValueHeader+60+(k*13+i*29+p*7)%120)
	binary.BigEndian.PutUint32(v[0:], uint32(p))
	binary.BigEndian.PutUint32(v[4:], uint32(k))
	binary.BigEndian.PutUint32(v[8:], uint32(i))
	for j := crashValueHeader; j < len(v); j++ {
		v[j] = byte(p*31 + k*7 + i*3 + j)
	}
	return v
}

// crashProducerBatch is batch k of producer p, with base sequence seq
// (crashSeq(p, k), passed in to keep the child linear).
func crashProducerBatch(p, k int, seq int32) []byte {
	b, err := testutil.BuildBatch(testutil.BatchSpec{Producer: true, PID: int64(p), Seq: seq, Records: crashCount(p, k),
		Value: func(i int) []byte { return crashValue(p, k, i) }, Timestamp: time.Now().UnixMilli()})
	if err != nil {
		panic(err)
	}
	return b
}

func crashRaceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" && s.Value == "true" {
			return true
		}
	}
	return false
}

// TestCrashRetryingProducersChild is the child side of
// TestCrashRetryingProducers: it opens the engine (recovering after the
// previous kill) and runs the producers from the batches the parent names,
// printing every answer, until killed. Lines:
//
//	ready
//	ack p k base last dup kind   (kind: resend = the last acknowledged batch
//	                              again, new = batch k, retry = batch k again
//	                              right after its acknowledgement)
//	oos p k                      (the resend of the last acknowledged batch k
//	                              got OUT_OF_ORDER_SEQUENCE_NUMBER)
//	error ...
func TestCrashRetryingProducersChild(t *testing.T) {
	dir := os.Getenv(crashProdDirEnv)
	if dir == "" {
		t.Skip("child process of TestCrashRetryingProducers")
	}
	rep := testutil.NewReporter()
	say, fail := rep.Say, rep.Fail
	fields := strings.Split(os.Getenv(crashProdNextEnv), ",")
	if len(fields) != crashProducers {
		fail("bad %s %q", crashProdNextEnv, os.Getenv(crashProdNextEnv))
	}
	var next [crashProducers + 1]int
	for i, f := range fields {
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			fail("bad %s %q", crashProdNextEnv, os.Getenv(crashProdNextEnv))
		}
		next[i+1] = n
	}
	seed, _ := strconv.ParseUint(os.Getenv(crashProdSeedEnv), 10, 64)

	e, err := Open(dir, crashEngineOptions())
	if err != nil {
		fail("open: %v", err)
	}
	if err := e.CreateTopic(crashProdTopic, 2); err != nil {
		fail("create topic: %v", err)
	}
	var parts [2]*Partition
	for i := range parts {
		if parts[i], err = e.Partition(crashProdTopic, i); err != nil {
			fail("partition: %v", err)
		}
	}
	say("ready")
	var wg sync.WaitGroup
	for p := 1; p <= crashProducers; p++ {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(p)))
			part := parts[p%2]
			k := next[p]
			seq := crashSeq(p, k)
			if k > 0 {
				// The last acknowledged batch again: the newest batch of
				// the producer in the log, unless batch k made it in
				// before the kill.
				prev := crashProducerBatch(p, k-1, seq-int32(crashCount(p, k-1)))
				res, err := part.Append(prev)
				switch {
				case err == nil:
					say("ack %d %d %d %d %t resend", p, k-1, res.BaseOffset, res.LastOffset, res.Duplicate)
				case errors.Is(err, producer.ErrOutOfOrderSequence):
					say("oos %d %d", p, k-1)
				default:
					fail("producer %d resend of batch %d: %v", p, k-1, err)
				}
			}
			for ; ; k++ {
				b := crashProducerBatch(p, k, seq)
				res, err := part.Append(b)
				if err != nil {
					fail("producer %d batch %d: %v", p, k, err)
				}
				say("ack %d %d %d %d %t new", p, k, res.BaseOffset, res.LastOffset, res.Duplicate)
				if rng.IntN(4) == 0 {
					res, err := part.Append(b)
					if err != nil {
						fail("producer %d retry of batch %d: %v", p, k, err)
					}
					say("ack %d %d %d %d %t retry", p, k, res.BaseOffset, res.LastOffset, res.Duplicate)
				}
				seq += int32(crashCount(p, k))
			}
		})
	}
	wg.Wait()
}

type crashOffsets struct{ base, last int64 }

// crashProducersState is what the parent knows, from the children's
// acknowledgements only.
type crashProducersState struct {
	// acked[p][k] are the offsets batch k of producer p was first
	// acknowledged at; len(acked[p]) is the first batch not acknowledged.
	acked [crashProducers + 1][]crashOffsets
	// mustDup[p] is a batch that must be in the log already (its
	// predecessor's resend was refused as out of order), or -1.
	mustDup [crashProducers + 1]int

	rounds, newAcks, inflightDups, resendDups, retryDups, oos int
}

// TestCrashRetryingProducers really kills a process whose idempotent
// producers append under SyncAlways, at random moments, and restarts them
// from their first unacknowledged batch, after resending their last
// acknowledged one, like a producer that lost its connection. A batch
// written but not acknowledged before a kill is sent again by the next
// child: it must be written once, either then or before (and then answered
// as a duplicate). Duplicates must carry the offsets first acknowledged;
// in the end every producer's records are in the log exactly once, in
// order, up to its last acknowledged batch and at most one batch beyond.
func TestCrashRetryingProducers(t *testing.T) {
	if os.Getenv(crashProdDirEnv) != "" {
		t.Skip("in the child")
	}
	rounds := *crashProducerRounds
	if testing.Short() || crashRaceEnabled() {
		rounds = min(rounds, 8)
	}
	dir := t.TempDir()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	st := &crashProducersState{}
	for p := range st.mustDup {
		st.mustDup[p] = -1
	}
	start := time.Now()
	for round := 1; round <= rounds; round++ {
		st.runChild(t, dir, round, rng.Uint64(), time.Duration(5+rng.IntN(146))*time.Millisecond)
	}
	t.Logf("%d rounds in %v: %d batches acknowledged, duplicates: %d resends of the last acknowledged batch, %d retries right after an acknowledgement, %d batches written before a kill and recognised after it; %d resends refused as out of order",
		rounds, time.Since(start).Round(time.Millisecond), st.newAcks, st.resendDups, st.retryDups, st.inflightDups, st.oos)
	st.checkLog(t, dir)
}

// runChild runs one child from st's acknowledgements, kills it after delay,
// and checks and records each of its answers.
func (st *crashProducersState) runChild(t *testing.T, dir string, round int, seed uint64, delay time.Duration) {
	t.Helper()
	var next [crashProducers]string
	var roundStart [crashProducers + 1]int
	for p := 1; p <= crashProducers; p++ {
		roundStart[p] = len(st.acked[p])
		next[p-1] = strconv.Itoa(roundStart[p])
	}
	child := testutil.StartChild(t, "TestCrashRetryingProducersChild", crashProdDirEnv+"="+dir,
		crashProdNextEnv+"="+strings.Join(next[:], ","),
		crashProdSeedEnv+"="+strconv.FormatUint(seed, 10))
	fatal := func(format string, args ...any) {
		t.Helper()
		child.Abort()
		t.Fatalf("round %d: "+format, append([]any{round}, args...)...)
	}
	var answered [crashProducers + 1]bool
	st.rounds++
	res := child.Watch(t, fmt.Sprintf("round %d", round), testutil.Watch{KillAfter: delay, Line: func(f []string) error {
		line := strings.Join(f, " ")
		switch {
		case strings.HasPrefix(line, "oos "):
			var p, k int
			if _, err := fmt.Sscanf(line, "oos %d %d", &p, &k); err != nil || p < 1 || p > crashProducers {
				fatal("bad child line %q", line)
			}
			// Allowed (spec 2.7) only when batch k+1 made it into the log
			// before the kill and a snapshot holds it as the newest batch:
			// then k+1 must come back as a duplicate.
			if answered[p] || k != roundStart[p]-1 {
				fatal("producer %d: out of order for batch %d, which is not the resend of the last acknowledged batch %d", p, k, roundStart[p]-1)
			}
			answered[p] = true
			st.mustDup[p] = k + 1
			st.oos++
		case strings.HasPrefix(line, "ack "):
			var p, k int
			var o crashOffsets
			var dup bool
			var kind string
			if _, err := fmt.Sscanf(line, "ack %d %d %d %d %t %s", &p, &k, &o.base, &o.last, &dup, &kind); err != nil || p < 1 || p > crashProducers {
				fatal("bad child line %q", line)
			}
			answered[p] = true
			if o.last-o.base+1 != int64(crashCount(p, k)) {
				fatal("producer %d batch %d (%s) acknowledged at %d..%d, but it has %d records", p, k, kind, o.base, o.last, crashCount(p, k))
			}
			acked := st.acked[p]
			switch {
			case k < len(acked):
				// A batch acknowledged before, resent.
				if !dup {
					fatal("producer %d batch %d (%s) written twice: first at %d..%d, again at %d..%d", p, k, kind, acked[k].base, acked[k].last, o.base, o.last)
				}
				if o != acked[k] {
					fatal("producer %d batch %d (%s): duplicate at %d..%d, first acknowledged at %d..%d", p, k, kind, o.base, o.last, acked[k].base, acked[k].last)
				}
				if kind == "retry" {
					st.retryDups++
				} else {
					st.resendDups++
				}
			case k == len(acked) && kind == "new":
				if dup {
					// Only the batch in flight at the last kill may be
					// in the log already.
					if k != roundStart[p] {
						fatal("producer %d batch %d, first sent in this round, answered as a duplicate at %d..%d", p, k, o.base, o.last)
					}
					st.inflightDups++
				} else if st.mustDup[p] == k {
					fatal("producer %d batch %d written at %d..%d, but the resend of batch %d was refused as out of order, so batch %d was in the log already (written twice, or the refusal was wrong)", p, k, o.base, o.last, k-1, k)
				}
				if k > 0 && o.base <= acked[k-1].last {
					fatal("producer %d batch %d at %d..%d, not after batch %d at %d..%d", p, k, o.base, o.last, k-1, acked[k-1].base, acked[k-1].last)
				}
				st.mustDup[p] = -1
				st.acked[p] = append(acked, o)
				st.newAcks++
			default:
				fatal("producer %d: %s answer for batch %d, expected batch %d", p, kind, k, len(acked))
			}
		}
		return nil
	}})
	if !res.SIGKILLed {
		t.Fatalf("round %d: child did not die by SIGKILL: %v", round, res.Err)
	}
}

// checkLog opens the engine after the last kill and checks both partitions
// record by record against the acknowledgements, then that a retry of each
// producer's newest batch is recognised after this recovery too.
func (st *crashProducersState) checkLog(t *testing.T, dir string) {
	t.Helper()
	e, err := Open(dir, crashEngineOptions())
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer func() {
		if err := e.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	// found[p] is the number of batches of p seen so far; at[p][k] where.
	var found [crashProducers + 1]int
	var at [crashProducers + 1][]crashOffsets
	var dec batch.Decoder
	records := 0
	for idx := range 2 {
		part, err := e.Partition(crashProdTopic, idx)
		if err != nil {
			t.Fatal(err)
		}
		l := part.log
		if hw, leo := l.HighWatermark(), l.LogEndOffset(); hw != leo {
			t.Fatalf("partition %d: high watermark %d, log end %d after recovery", idx, hw, leo)
		}
		next := l.LogStartOffset()
		if next != 0 {
			t.Fatalf("partition %d: log start %d, nothing was deleted", idx, next)
		}
		for next < l.HighWatermark() {
			c, err := l.Read(next, 1<<20)
			if err != nil {
				t.Fatalf("partition %d: Read(%d): %v", idx, next, err)
			}
			if c.NextOffset <= next {
				t.Fatalf("partition %d: Read(%d) made no progress", idx, next)
			}
			batches := batch.NewIter(c.Data)
			for batches.Next() {
				b, err := batch.Parse(batches.Batch())
				if err != nil {
					t.Fatalf("partition %d: batch at %d: %v", idx, next, err)
				}
				if b.BaseOffset() != next {
					t.Fatalf("partition %d: offsets not dense: batch at %d, expected %d", idx, b.BaseOffset(), next)
				}
				next = b.NextOffset()
				p := int(b.ProducerID())
				if p < 1 || p > crashProducers || p%2 != idx || b.ProducerEpoch() != 0 {
					t.Fatalf("partition %d: batch at %d from producer %d epoch %d", idx, b.BaseOffset(), b.ProducerID(), b.ProducerEpoch())
				}
				k := found[p]
				recs, err := dec.Records(b)
				if err != nil {
					t.Fatalf("partition %d: batch at %d: %v", idx, b.BaseOffset(), err)
				}
				var r batch.Record
				i := 0
				for ; recs.Next(&r); i++ {
					v := r.Value
					if len(v) < crashValueHeader {
						t.Fatalf("partition %d: record at %d: value of %d bytes", idx, r.Offset, len(v))
					}
					rp, rk, ri := int(binary.BigEndian.Uint32(v)), int(binary.BigEndian.Uint32(v[4:])), int(binary.BigEndian.Uint32(v[8:]))
					if rp != p || rk != k || ri != i {
						t.Fatalf("partition %d: record at %d is producer %d batch %d record %d, expected producer %d batch %d record %d (a batch repeated or missing)",
							idx, r.Offset, rp, rk, ri, p, k, i)
					}
					if !bytes.Equal(v, crashValue(p, k, i)) {
						t.Fatalf("partition %d: record at %d (producer %d batch %d record %d): value differs", idx, r.Offset, p, k, i)
					}
				}
				if err := recs.Err(); err != nil {
					t.Fatalf("partition %d: batch at %d: %v", idx, b.BaseOffset(), err)
				}
				if i != crashCount(p, k) || b.BaseSequence() != crashSeq(p, k) {
					t.Fatalf("partition %d: producer %d batch %d at %d: %d records from sequence %d, want %d from %d",
						idx, p, k, b.BaseOffset(), i, b.BaseSequence(), crashCount(p, k), crashSeq(p, k))
				}
				o := crashOffsets{b.BaseOffset(), b.LastOffset()}
				if k < len(st.acked[p]) && st.acked[p][k] != o {
					t.Fatalf("partition %d: producer %d batch %d at %d..%d, acknowledged at %d..%d", idx, p, k, o.base, o.last, st.acked[p][k].base, st.acked[p][k].last)
				}
				at[p] = append(at[p], o)
				found[p]++
				records += i
			}
			if err := batches.Err(); err != nil {
				t.Fatalf("partition %d: batch at %d: %v", idx, next, err)
			}
			c.Release()
		}
		if next != l.LogEndOffset() {
			t.Fatalf("partition %d: batches end at %d, log end %d", idx, next, l.LogEndOffset())
		}
	}
	unacked := 0
	for p := 1; p <= crashProducers; p++ {
		acked := len(st.acked[p])
		if found[p] < acked {
			t.Fatalf("producer %d: %d batches in the log, %d acknowledged: batch %d lost", p, found[p], acked, found[p])
		}
		// Each producer has one batch in flight at a time.
		if found[p] > acked+1 {
			t.Fatalf("producer %d: %d batches in the log, only %d acknowledged and one in flight", p, found[p], acked)
		}
		if st.mustDup[p] >= 0 && found[p] <= st.mustDup[p] {
			t.Fatalf("producer %d: the resend of batch %d was refused as out of order, yet batch %d is not in the log", p, st.mustDup[p]-1, st.mustDup[p])
		}
		unacked += found[p] - acked
	}
	// After this recovery too, a retry of each producer's newest batch is
	// recognised, with its offsets.
	for p := 1; p <= crashProducers; p++ {
		k := found[p] - 1
		if k < 0 {
			continue
		}
		part, _ := e.Partition(crashProdTopic, p%2)
		res, err := part.Append(crashProducerBatch(p, k, crashSeq(p, k)))
		if err != nil || !res.Duplicate || (crashOffsets{res.BaseOffset, res.LastOffset}) != at[p][k] {
			t.Fatalf("producer %d: retry of its newest batch %d (at %d..%d) after the last recovery: %+v %v", p, k, at[p][k].base, at[p][k].last, res, err)
		}
	}
	segs, _ := filepath.Glob(filepath.Join(dir, crashProdTopic+"-*", "*.log"))
	snaps, _ := filepath.Glob(filepath.Join(dir, crashProdTopic+"-*", "*.snapshot"))
	t.Logf("log: %d batches, %d records, %d segments, %d snapshots; %d batches written but not acknowledged in the last round",
		found[1]+found[2]+found[3]+found[4], records, len(segs), len(snaps), unacked)
}
