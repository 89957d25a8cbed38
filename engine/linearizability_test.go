package engine

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/partition"
	"github.com/idemlog/idemlog/producer"
	"github.com/idemlog/idemlog/segment"
)

// TestLinearizability runs concurrent idempotent producers against one
// partition and checks with porcupine that every history is linearizable
// against the sequential model in porcupine_model_test.go, then that the
// log holds exactly the batches acknowledged as written.
//
//	go test ./engine -run Linearizability -lin.histories 20000
//	go test ./engine -run Linearizability -lin.seed N   # a seed's workload again (its interleaving differs)

var (
	linHistories = flag.Int("lin.histories", 0, "histories for TestLinearizability (0: 1000)")
	linSeed      = flag.Uint64("lin.seed", 0, "base seed for TestLinearizability (0: from the clock)")
)

const (
	linCheckTimeout = 5 * time.Second
	// linParallel is how many histories run at once.
	linParallel = 16
	// linHistoryTimeout bounds one history's appends (normally well under
	// a second): past it the history fails with the appends still in
	// flight and their goroutines' stacks, instead of hanging the test.
	linHistoryTimeout = 30 * time.Second
)

// linDefaultHistories: about 10 s on 2 cores, 10-20 s under -race (most of
// it fsyncs and zeroed files of engine open, create and close).
const linDefaultHistories = 1000

// linRecord is one append of a history, with the bytes sent.
type linRecord struct {
	client int // porcupine client id: 2*slot (main), 2*slot+1 (helper)
	in     linInput
	out    linOutput
	b      []byte
	call   int64
	ret    int64
	err    error
}

type linStats struct {
	histories, ops, written, dups, outOfOrder, fenced int
	// racedDups: an append answered Dup while another append of the same
	// batch, which wrote it, was in flight.
	racedDups int
	maxCheck  time.Duration // slowest porcupine check
}

func TestLinearizability(t *testing.T) {
	t.Parallel()
	n := linDefaultHistories
	if *linHistories > 0 {
		n = *linHistories
	}
	seed := *linSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("%d histories, -lin.seed %d", n, seed)
	root := t.TempDir()
	model := linModel(linCorrect)
	var (
		mu       sync.Mutex // guards st, failures and t's reports
		st       linStats
		failures int
		wg       sync.WaitGroup
		next     atomic.Int64
	)
	begin := time.Now()
	// Histories run linParallel at a time: each engine's open, create and
	// close wait on fsyncs far longer than its appends take CPU.
	for range linParallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				h := int(next.Add(1) - 1)
				mu.Lock()
				stop := h >= n || failures >= 3
				mu.Unlock()
				if stop {
					return
				}
				hseed := seed + uint64(h)
				recs, problems := linRunHistory(filepath.Join(root, strconv.Itoa(h)), hseed)
				t0 := time.Now()
				res := porcupine.CheckOperationsTimeout(model, linOperations(recs), linCheckTimeout)
				d := time.Since(t0)
				mu.Lock()
				st.add(recs)
				st.maxCheck = max(st.maxCheck, d)
				if (res != porcupine.Ok || len(problems) > 0) && failures < 3 {
					failures++ // report the first 3, then stop
					verdict := string(res)
					switch {
					case recs == nil:
						verdict = "hung"
					case res == porcupine.Ok:
						verdict = "linearizable, but the log is wrong"
					}
					linReport(t, model, recs, fmt.Sprintf("history %d (-lin.seed %d -lin.histories 1; %s): %s", h, hseed, linDescribeOptions(linOptions(hseed)), verdict), problems)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("%d histories in %v: %d appends: %d written, %d duplicates (%d raced with the write), %d out of order, %d fenced; slowest check %v",
		st.histories, time.Since(begin).Round(time.Millisecond), st.ops, st.written, st.dups, st.racedDups, st.outOfOrder, st.fenced, st.maxCheck)
	if failures == 0 && (st.dups == 0 || st.outOfOrder == 0 || st.fenced == 0 || st.racedDups == 0) && n >= 100 {
		t.Errorf("workload too weak: %+v", st)
	}
}

// TestLinearizabilityCatchesBrokenModel shows the check can fail: against a
// deliberately wrong model, some history of the same workload must be
// reported non-linearizable; and against the right model, hand-made
// histories with wrong answers must be illegal.
func TestLinearizabilityCatchesBrokenModel(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for _, mut := range []linMutation{linMutNoDedup, linMutNoFence, linMutOffByOne} {
		model := linModel(mut)
		caught := false
		for h := 0; h < 100 && !caught; h++ {
			// The log's own problems are TestLinearizability's to report.
			recs, _ := linRunHistory(filepath.Join(root, fmt.Sprint(mut, "-", h)), uint64(h))
			caught = porcupine.CheckOperationsTimeout(model, linOperations(recs), linCheckTimeout) == porcupine.Illegal
		}
		if !caught {
			t.Errorf("mutation %d: no history was found non-linearizable", mut)
		}
	}

	// Hand-made histories of a broken engine, checked with the right model.
	in := func(slot int, e int16, seq, n int32) linInput {
		return linInput{Slot: slot, PID: int64(100 + slot), Epoch: e, FirstSeq: seq, Count: n}
	}
	ok := func(base, last int64) linOutput { return linOutput{OK: true, Base: base, Last: last} }
	dup := func(base, last int64) linOutput { return linOutput{OK: true, Dup: true, Base: base, Last: last} }
	op := func(c int, i linInput, o linOutput, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: c, Input: i, Output: o, Call: call, Return: ret}
	}
	bad := map[string][]porcupine.Operation{
		"same batch written twice at once": {
			op(0, in(0, 0, 0, 2), ok(0, 1), 0, 10),
			op(1, in(0, 0, 0, 2), ok(2, 3), 1, 11),
		},
		"duplicate before the write": {
			op(0, in(0, 0, 0, 1), dup(0, 0), 0, 1),
			op(0, in(0, 0, 0, 1), ok(0, 0), 2, 3),
		},
		"overlapping offsets": {
			op(0, in(0, 0, 0, 2), ok(0, 1), 0, 10),
			op(1, in(1, 0, 7, 2), ok(1, 2), 0, 10),
		},
		"retry older than the cache deduplicated": {
			op(0, in(0, 0, 0, 1), ok(0, 0), 0, 1),
			op(0, in(0, 0, 1, 1), ok(1, 1), 2, 3),
			op(0, in(0, 0, 2, 1), ok(2, 2), 4, 5),
			op(0, in(0, 0, 3, 1), ok(3, 3), 6, 7),
			op(0, in(0, 0, 4, 1), ok(4, 4), 8, 9),
			op(0, in(0, 0, 5, 1), ok(5, 5), 10, 11),
			op(0, in(0, 0, 0, 1), dup(0, 0), 12, 13),
		},
		"zombie epoch accepted": {
			op(0, in(0, 1, 0, 1), ok(0, 0), 0, 1),
			op(0, in(0, 0, 1, 1), ok(1, 1), 2, 3),
		},
		"new epoch not at 0 accepted": {
			op(0, in(0, 0, 0, 1), ok(0, 0), 0, 1),
			op(0, in(0, 1, 1, 1), ok(1, 1), 2, 3),
		},
		"wrap refused": {
			op(0, in(0, 0, math.MaxInt32-1, 2), ok(0, 1), 0, 1),
			op(0, in(0, 0, 0, 1), linOutput{Err: linErrOutOfOrder}, 2, 3),
		},
	}
	model := linModel(linCorrect)
	for name, h := range bad {
		if res := porcupine.CheckOperationsTimeout(model, h, time.Second); res != porcupine.Illegal {
			t.Errorf("%s: %s, want Illegal", name, res)
		}
	}
	good := []porcupine.Operation{
		op(0, in(0, 0, math.MaxInt32-1, 3), ok(0, 2), 0, 10),
		op(1, in(0, 0, math.MaxInt32-1, 3), dup(0, 2), 1, 11),
		op(2, in(1, 3, 9, 1), ok(3, 3), 2, 12),
		op(0, in(0, 0, 1, 1), ok(4, 4), 13, 14),
		op(2, in(1, 2, 10, 1), linOutput{Err: linErrFenced}, 13, 14),
	}
	if res := porcupine.CheckOperationsTimeout(model, good, time.Second); res != porcupine.Ok {
		t.Errorf("good history: %s, want Ok", res)
	}
}

// linOptions chooses a history's engine options by its seed. Most use
// small index files and reservations: a partition's default ones are 28 MB
// that the kernel zeroes, which would dominate the run time.
func linOptions(seed uint64) Options {
	small := segment.Options{IndexMaxBytes: 64 << 10, ReserveAhead: 64 << 10}
	var o Options
	switch seed % 8 {
	case 0: // SyncAlways
		o.Partition.Segment = small
		o.Partition.Sync = partition.SyncPolicy{Kind: partition.SyncAlways}
	case 1: // all defaults: SyncNever
	case 2, 3: // segments of 2 KiB: a few rolls (with snapshots) per history
		o.Partition.Segment = small
		o.Partition.Segment.MaxBytes = 2 << 10
	default:
		o.Partition.Segment = small
	}
	return o
}

func linDescribeOptions(o Options) string {
	return fmt.Sprintf("sync %v, segment %+v", o.Partition.Sync, o.Partition.Segment)
}

// linRunHistory runs one history with options linOptions(seed) on a fresh
// engine in dir, and returns its appends and what is wrong with the log
// afterwards.
func linRunHistory(dir string, seed uint64) ([]linRecord, []string) {
	opts := linOptions(seed)
	defer os.RemoveAll(dir)
	e, err := Open(dir, opts)
	if err != nil {
		return nil, []string{err.Error()}
	}
	hung := false
	defer func() {
		if !hung {
			e.Close()
		}
	}()
	if err := e.CreateTopic("lin", 1); err != nil {
		return nil, []string{err.Error()}
	}
	p, err := e.Partition("lin", 0)
	if err != nil {
		return nil, []string{err.Error()}
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	producers := 3 + rng.IntN(2)
	start := time.Now()
	inflight := &linInflight{m: map[int]linRecord{}}
	recs := make([][]linRecord, 2*producers) // by client id
	var wg sync.WaitGroup
	for slot := range producers {
		pr := &linProducerRun{
			p: p, start: start, slot: slot, inflight: inflight,
			pid:    int64(slot)*1000 + int64(rng.IntN(1000)),
			rng:    rand.New(rand.NewPCG(seed, uint64(slot)+1)),
			main:   &recs[2*slot],
			helper: &recs[2*slot+1],
			retry:  make(chan linRetry, 1),
		}
		wg.Add(2)
		go func() {
			defer wg.Done()
			for m := range pr.retry {
				pr.append(pr.helper, 2*slot+1, m.in, m.b)
			}
		}()
		go func() {
			defer wg.Done()
			defer close(pr.retry)
			pr.run(8 + pr.rng.IntN(5))
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(linHistoryTimeout):
		// The stuck goroutines cannot be stopped: leave them (and the
		// engine) behind, and report.
		hung = true
		return nil, []string{inflight.describe(time.Since(start).Nanoseconds())}
	}
	var all []linRecord
	for _, r := range recs {
		all = append(all, r...)
	}
	problems := linVerifyLog(p, all)
	if err := e.Close(); err != nil {
		problems = append(problems, fmt.Sprintf("close: %v", err))
	}
	return all, problems
}

type linRetry struct {
	in linInput
	b  []byte
}

// linProducerRun is one producer's main goroutine: it sends in-order
// batches and, mixed in, retries, gaps, overlaps and epoch bumps. Its
// helper goroutine (client id 2*slot+1) appends what it is handed on
// retry, often the batch the main goroutine is sending at that moment.
type linProducerRun struct {
	p        *Partition
	start    time.Time
	slot     int
	pid      int64
	rng      *rand.Rand
	main     *[]linRecord
	helper   *[]linRecord
	retry    chan linRetry
	inflight *linInflight
}

// linInflight is the appends of a history in progress, by client id.
type linInflight struct {
	mu sync.Mutex
	m  map[int]linRecord
}

func (f *linInflight) set(cid int, r *linRecord) {
	f.mu.Lock()
	if r != nil {
		f.m[cid] = *r
	} else {
		delete(f.m, cid)
	}
	f.mu.Unlock()
}

// describe reports the appends still in flight and the stacks of the
// goroutines inside Partition.Append.
func (f *linInflight) describe(now int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "history did not finish in %v; appends in flight:\n", linHistoryTimeout)
	f.mu.Lock()
	for cid, r := range f.m {
		fmt.Fprintf(&b, "  client %d: pid %d e%d seq %d+%d, called %v ago\n",
			cid, r.in.PID, r.in.Epoch, r.in.FirstSeq, r.in.Count, time.Duration(now-r.call))
	}
	f.mu.Unlock()
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "engine.(*Partition).Append") {
			fmt.Fprintf(&b, "%s\n\n", g)
		}
	}
	return b.String()
}

func (r *linProducerRun) run(ops int) {
	rng := r.rng
	epoch := int16(rng.IntN(3))
	var next int32 // first sequence of the producer's first batch: any (unknown producer)
	switch rng.IntN(4) {
	case 0:
		next = math.MaxInt32 - int32(rng.IntN(6)) // wraps within a few batches
	case 1:
		next = int32(rng.IntN(1000))
	}
	var sent []linRetry // acknowledged batches, oldest first
	bump := false
	for range ops {
		var cur []linRetry // acknowledged at the current epoch
		for _, s := range sent {
			if s.in.Epoch == epoch {
				cur = append(cur, s)
			}
		}
		n := int32(1 + rng.IntN(3))
		in := linInput{Slot: r.slot, PID: r.pid, Epoch: epoch, FirstSeq: next, Count: n}
		advance := false // an in-order batch: the producer moves on once it is acknowledged
		var b []byte
		switch x := rng.IntN(100); {
		case bump || (x < 8 && len(sent) > 0): // epoch bump
			in.Epoch, in.FirstSeq, advance, bump = epoch+1, 0, true, false
		case x < 12 && len(sent) > 0: // new epoch not starting at 0
			in.Epoch, in.FirstSeq = epoch+1, int32(1+rng.IntN(4))
		case x < 20 && len(cur) < len(sent): // zombie: a batch of an older epoch
			old := sent[rng.IntN(len(sent)-len(cur))]
			in, b = old.in, old.b
		case x < 34 && len(cur) > 0: // retry of one of the last 5
			s := cur[max(0, len(cur)-1-rng.IntN(linCacheSize))]
			in, b = s.in, s.b
		case x < 40 && len(cur) > linCacheSize: // retry older than the cache
			s := cur[rng.IntN(len(cur)-linCacheSize)]
			in, b = s.in, s.b
		case x < 46 && len(cur) > 0: // partial overlap with a cached batch
			s := cur[max(0, len(cur)-1-rng.IntN(linCacheSize))].in
			in.FirstSeq, in.Count = s.FirstSeq, s.Count+1
			if s.Count > 1 && rng.IntN(2) == 0 {
				in.FirstSeq, in.Count = linNextSeq(s.FirstSeq), s.Count-1
			}
		case x < 54 && len(sent) > 0: // gap
			in.FirstSeq = linNextSeq(next)
			for range rng.IntN(3) {
				in.FirstSeq = linNextSeq(in.FirstSeq)
			}
		default: // the next batch
			advance = true
		}
		if b == nil {
			b = linBatchBytes(in)
		}
		var twin sync.WaitGroup
		switch {
		case len(sent) == 0:
			// The first batch, which creates the producer's entry: send
			// it twice at once, from a fresh goroutine as the helper's
			// client (the helper has had nothing to do yet).
			start := make(chan struct{})
			twin.Add(1)
			go func() {
				defer twin.Done()
				<-start
				r.append(r.helper, 2*r.slot+1, in, b)
			}()
			close(start)
		case advance && rng.IntN(2) == 0:
			// Send it from the helper too, at the same time.
			select {
			case r.retry <- linRetry{in, b}:
			default:
			}
		}
		out := r.append(r.main, 2*r.slot, in, b)
		twin.Wait()
		switch {
		case out.OK && (advance || !out.Dup):
			epoch, next = in.Epoch, linNextSeq(linLastSeq(in.FirstSeq, in.Count))
			sent = append(sent, linRetry{in, b})
		case advance:
			bump = true // lost track: start over at a new epoch
		}
		if len(sent) > 0 && rng.IntN(4) == 0 {
			// Have the helper retry an acknowledged batch meanwhile.
			select {
			case r.retry <- sent[rng.IntN(len(sent))]:
			default:
			}
		}
	}
}

// append appends b and records it for client id cid in *recs.
func (r *linProducerRun) append(recs *[]linRecord, cid int, in linInput, b []byte) linOutput {
	call := time.Since(r.start).Nanoseconds()
	r.inflight.set(cid, &linRecord{client: cid, in: in, call: call})
	res, err := r.p.Append(b)
	ret := time.Since(r.start).Nanoseconds()
	r.inflight.set(cid, nil)
	out := linOutput{OK: err == nil, Dup: res.Duplicate, Base: res.BaseOffset, Last: res.LastOffset}
	switch {
	case err == nil:
	case errors.Is(err, producer.ErrOutOfOrderSequence):
		out = linOutput{Err: linErrOutOfOrder}
	case errors.Is(err, producer.ErrInvalidProducerEpoch):
		out = linOutput{Err: linErrFenced}
	default:
		out = linOutput{Err: linErrOther}
	}
	*recs = append(*recs, linRecord{client: cid, in: in, out: out, b: b, call: call, ret: ret, err: err})
	return out
}

// linBatchBytes builds in's batch; its values name the producer, so that
// no two batches of a history are alike.
func linBatchBytes(in linInput) []byte {
	bl := batch.NewBuilder(batch.CodecNone)
	bl.SetProducer(in.PID, in.Epoch, in.FirstSeq)
	ts := time.Now().UnixMilli()
	for i := range in.Count {
		bl.Append(ts, nil, fmt.Appendf(nil, "%d/%d/%d/%d", in.PID, in.Epoch, in.FirstSeq, i), nil)
	}
	out, err := bl.Build()
	if err != nil {
		panic(err) // cannot happen for these batches
	}
	return bytes.Clone(out)
}

func linOperations(recs []linRecord) []porcupine.Operation {
	ops := make([]porcupine.Operation, len(recs))
	for i, r := range recs {
		ops[i] = porcupine.Operation{ClientId: r.client, Input: r.in, Call: r.call, Output: r.out, Return: r.ret}
	}
	return ops
}

// linVerifyLog checks that the log holds, in order and exactly once, every
// batch acknowledged as written (OK, not Dup), at its acknowledged offsets,
// and nothing else; and that every duplicate names such a batch.
func linVerifyLog(p *Partition, recs []linRecord) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	written := map[int64]int{} // base offset -> record
	once := map[linInput]int{} // batch -> record that wrote it
	var leo int64
	for i, r := range recs {
		if r.out.Err == linErrOther {
			bad("append %+v: %v", r.in, r.err)
		}
		if !r.out.OK || r.out.Dup {
			continue
		}
		if j, ok := written[r.out.Base]; ok {
			bad("appends %+v and %+v both written at %d", recs[j].in, r.in, r.out.Base)
		}
		written[r.out.Base] = i
		leo += int64(r.in.Count)
		// No producer state expires here, so a batch is never new twice.
		if j, ok := once[r.in]; ok {
			bad("batch %+v written twice: at [%d,%d] and [%d,%d]", r.in, recs[j].out.Base, recs[j].out.Last, r.out.Base, r.out.Last)
		}
		once[r.in] = i
	}
	l := p.log
	if hw := l.HighWatermark(); hw != leo {
		bad("high watermark %d, want %d (records acknowledged as written)", hw, leo)
	}
	seen := map[int64]bool{}
	for off := int64(0); off < l.HighWatermark(); {
		data, nextOff, err := l.ReadAppend(nil, off, 1<<20)
		if err != nil || len(data) == 0 {
			bad("read at %d (high watermark %d): %d bytes, %v", off, l.HighWatermark(), len(data), err)
			break
		}
		batches := batch.NewIter(data)
		for batches.Next() {
			b := batches.Batch()
			if b.BaseOffset() != off {
				bad("batch at %d, want %d", b.BaseOffset(), off)
			}
			off = b.NextOffset()
			i, ok := written[b.BaseOffset()]
			if !ok {
				bad("batch pid %d e%d seq %d+%d at %d: no append was answered with it",
					b.ProducerID(), b.ProducerEpoch(), b.BaseSequence(), b.RecordsCount(), b.BaseOffset())
				continue
			}
			seen[b.BaseOffset()] = true
			r := recs[i]
			sent := batch.Batch(r.b)
			if b.LastOffset() != r.out.Last || !bytes.Equal(b[8:12], sent[8:12]) || !bytes.Equal(b[16:], sent[16:]) {
				bad("batch at %d is not %+v answered [%d,%d]", b.BaseOffset(), r.in, r.out.Base, r.out.Last)
			}
		}
		if err := batches.Err(); err != nil {
			bad("batch at %d: %v", off, err)
			return problems
		}
		if nextOff != off {
			bad("read's next offset %d, want %d", nextOff, off)
			off = nextOff
		}
	}
	for base, i := range written {
		if !seen[base] {
			bad("append %+v answered [%d,%d] is not in the log", recs[i].in, base, recs[i].out.Last)
		}
	}
	for _, r := range recs {
		if !r.out.Dup {
			continue
		}
		i, ok := written[r.out.Base]
		if !ok || recs[i].in != r.in || recs[i].out.Last != r.out.Last {
			bad("duplicate %+v answered [%d,%d]: no such batch written", r.in, r.out.Base, r.out.Last)
		}
	}
	return problems
}

func (s *linStats) add(recs []linRecord) {
	s.histories++
	for _, r := range recs {
		s.ops++
		switch {
		case r.out.Dup:
			s.dups++
			for _, w := range recs {
				if w.out.OK && !w.out.Dup && w.in == r.in && w.call <= r.ret && r.call <= w.ret {
					s.racedDups++
					break
				}
			}
		case r.out.OK:
			s.written++
		case r.out.Err == linErrOutOfOrder:
			s.outOfOrder++
		case r.out.Err == linErrFenced:
			s.fenced++
		}
	}
}

// linReport fails the test with the history, and writes porcupine's
// visualization of it to a temporary file.
func linReport(t *testing.T, model porcupine.Model, recs []linRecord, what string, problems []string) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", what)
	for _, p := range problems {
		fmt.Fprintf(&b, "  log: %s\n", p)
	}
	if recs == nil {
		t.Error(b.String())
		return
	}
	sorted := append([]linRecord(nil), recs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].call < sorted[j].call })
	for _, r := range sorted {
		fmt.Fprintf(&b, "  [%9d,%9d] slot %d pid %d e%d seq %d+%d -> %s\n",
			r.call, r.ret, r.in.Slot, r.in.PID, r.in.Epoch, r.in.FirstSeq, r.in.Count, r.out)
	}
	_, info := porcupine.CheckOperationsVerbose(model, linOperations(recs), 2*linCheckTimeout)
	f, err := os.CreateTemp("", "idemlog-linearizability-*.html")
	if err == nil {
		f.Close()
		if err = porcupine.VisualizePath(model, info, f.Name()); err == nil {
			fmt.Fprintf(&b, "visualization: %s\n", f.Name())
		}
	}
	if err != nil {
		fmt.Fprintf(&b, "no visualization: %v\n", err)
	}
	t.Error(b.String())
}
