//go:build linux

package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/bench/sysstat"
	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/partition"
	"github.com/idemlog/idemlog/segment"
	"github.com/idemlog/idemlog/txnindex"
)

type syncPolicy = partition.SyncPolicy

func parseSync(s string) (syncPolicy, error) { return partition.ParseSyncPolicy(s) }

// Latencies are recorded in nanoseconds, from 1 ns to histMax, to 3
// significant digits; longer ones count as histMax.
const histMax = int64(100 * time.Second)

// partStat observes one partition's syncs: every producer, after its
// append returns, reports the partition's recovery point; each new value is
// one fdatasync (or more) that acknowledged appends.
type partStat struct {
	lastRP atomic.Int64
	syncs  atomic.Int64
	_      [48]byte // keep partitions' counters on separate cache lines
}

func (s *partStat) observe(rp int64) {
	for {
		old := s.lastRP.Load()
		if rp <= old {
			return
		}
		if s.lastRP.CompareAndSwap(old, rp) {
			s.syncs.Add(1)
			return
		}
	}
}

// fenceLeftoverTxns ends the transactions an earlier run of the bench left
// open in a reopened data dir (it crashed, or was killed, mid-transaction),
// as a new instance of each of its transactional producers would: their
// open transactions would hold every partition's last stable offset, and
// read_committed readers would stop there and report the run's records
// unread. A transactional run's producers would fence their own ids, but
// not those of an earlier run with more producers, and only after the run's
// start offsets are taken, so that their abort markers counted as the
// run's bytes: every mode fences here, before.
func fenceLeftoverTxns(e *engine.Engine) error {
	if _, ok := e.Topics()[engine.TransactionStateTopic]; !ok {
		return nil
	}
	c, err := e.Frontend().Coordinator()
	if err != nil {
		return err
	}
	for i := range MaxProducers {
		id := fmt.Sprintf("bench-%d", i)
		if _, _, st, ok := c.State(id); ok && st == engine.TxnOngoing {
			// Fencing aborts the open transaction and answers
			// CONCURRENT_TRANSACTIONS, as Kafka does; that is the point.
			if _, _, err := c.InitProducerID(id, time.Minute); err != nil && !errors.Is(err, engine.ErrConcurrentTransactions) {
				return fmt.Errorf("cannot end the earlier run's transaction of %s: %w", id, err)
			}
		}
	}
	return nil
}

// producer is one producer goroutine's state. Only the goroutine touches
// bld, cur and hist; the sampler reads the atomics.
type producer struct {
	part *engine.Partition
	log  engine.LogView // part's log, for its recovery point
	stat *partStat
	bld  *batch.Builder
	cur  *payloadCursor
	prod *engine.Producer              // idempotent mode
	txn  *engine.TransactionalProducer // transactional mode
	// txnBatches is how many batches a transaction holds; inTxn counts the
	// current one's.
	txnBatches, inTxn int
	// observeSyncs: the policy acknowledges appends by syncs (always,
	// bytes=N), which the recovery point counts; under the others it
	// moves only with the seals of rolled segments, which acknowledge
	// nothing. (Without this: syncs_observed was not 0 under never.)
	observeSyncs bool
	hist         *hdrhistogram.Histogram
	quota        int64 // records to write; -1: until stopped
	// gate holds the producer between the engine's slices of an
	// interleaved run.
	gate *gate

	records, batches, payload atomic.Int64
	// logged: bytes of the batches appended (compressed, as in the log),
	// which a run with retention cannot read back from the log.
	logged atomic.Int64
	ival   intervalHist
}

func (pr *producer) run(stop *atomic.Bool, codec batch.Codec, perBatch int) error {
	defer pr.gate.leave()
	if err := pr.write(stop, codec, perBatch); err != nil {
		return err
	}
	if pr.txn != nil && pr.inTxn > 0 {
		// Whatever the last transaction holds is committed, so that
		// read_committed readers and the figures see every record.
		if err := pr.txn.Commit(); err != nil {
			return err
		}
		pr.logged.Add(markerSize)
	}
	return nil
}

// markerSize is the size of the COMMIT marker each commit writes to the
// producer's partition: logged counts it, as the log holds it. (Without
// this: with retention, bytes, taken from logged, left markers out, and
// without, read back from the log, counted them.)
var markerSize = int64(len(batch.AppendMarker(nil, batch.Marker{Type: batch.ControlCommit})))

func (pr *producer) write(stop *atomic.Bool, codec batch.Codec, perBatch int) error {
	size := int64(pr.cur.size)
	left := pr.quota
	for !stop.Load() {
		// A producer released by the run's end must not start one more
		// batch.
		if pr.gate.wait(); stop.Load() {
			return nil
		}
		n := perBatch
		if left >= 0 {
			if left == 0 {
				return nil
			}
			n = int(min(int64(n), left))
		}
		pr.bld.Reset(codec)
		ts := time.Now().UnixMilli()
		for range n {
			pr.bld.Append(ts, nil, pr.cur.next(), nil)
		}
		t0 := time.Now()
		var err error
		switch {
		case pr.txn != nil:
			if _, err = pr.txn.Send(pr.part, pr.bld); err == nil {
				if pr.inTxn++; pr.inTxn == pr.txnBatches {
					pr.inTxn = 0
					if err = pr.txn.Commit(); err == nil {
						pr.logged.Add(markerSize)
					}
				}
			}
		case pr.prod != nil:
			_, err = pr.prod.Send(pr.part, pr.bld)
		default:
			var b batch.Batch
			if b, err = pr.bld.Build(); err == nil {
				_, err = pr.part.Append(b)
			}
		}
		lat := time.Since(t0).Nanoseconds()
		if err != nil {
			return err
		}
		_ = pr.hist.RecordValue(min(max(lat, 1), histMax))
		pr.ival.record(lat)
		if pr.observeSyncs {
			pr.stat.observe(pr.log.RecoveryPoint())
		}
		pr.records.Add(int64(n))
		pr.batches.Add(1)
		pr.payload.Add(int64(n) * size)
		pr.logged.Add(int64(pr.bld.Built()))
		if left > 0 {
			left -= int64(n)
		}
	}
	return nil
}

// reader tails partitions from their start, counting what it reads.
type reader struct {
	parts          []*engine.Partition
	committed      bool // read_committed: below the LSO, aborted transactions hidden
	records, bytes atomic.Int64
	aborted        []txnindex.Entry
	filter         txnindex.Filter
	gate           *gate
}

func (r *reader) run(writersDone, abort *atomic.Bool) error {
	defer r.gate.leave()
	offs := make([]int64, len(r.parts))
	for i, p := range r.parts {
		offs[i] = p.LogStartOffset()
	}
	for !abort.Load() {
		r.gate.wait()
		// Loaded before the reads: once the writers are done, a reader that
		// reaches the high watermark has read everything.
		done := writersDone.Load()
		progressed, caughtUp := false, true
		for i, p := range r.parts {
			l := p
			end := l.HighWatermark()
			var c partition.Chunk
			var err error
			if r.committed {
				end = p.LastStableOffset()
				c, r.aborted, err = p.ReadCommitted(offs[i], 1<<20, r.aborted[:0])
			} else {
				c, err = l.Read(offs[i], 1<<20)
			}
			if err != nil {
				return fmt.Errorf("reader: %w", err)
			}
			if len(c.Data) > 0 {
				var recs int64
				if r.committed {
					r.filter.Reset(r.aborted)
					recs, err = countCommitted(c.Data, &r.filter)
				} else {
					recs, _, err = countBatches(c.Data)
				}
				if err != nil {
					c.Release()
					return fmt.Errorf("reader: partition %d offset %d: %w", p.Index(), offs[i], err)
				}
				r.records.Add(recs)
				r.bytes.Add(int64(len(c.Data)))
				offs[i] = c.NextOffset
				progressed = true
			}
			c.Release()
			if offs[i] < end {
				caughtUp = false
			}
		}
		if done && caughtUp {
			return nil
		}
		if !progressed {
			time.Sleep(time.Millisecond)
		}
	}
	return nil
}

// countBatches counts the records (outside control batches) and batches
// of whole batches laid end to end.
func countBatches(data []byte) (records, batches int64, err error) {
	it := batch.NewIter(data)
	for it.Next() {
		if b := it.Batch(); !b.IsControl() {
			records += int64(b.RecordsCount())
		}
		batches++
	}
	return records, batches, it.Err()
}

// logBytes returns the bytes of the batches in [from, to) of l.
func logBytes(l *engine.Partition, from, to int64) (int64, error) {
	var total int64
	for off := max(from, l.LogStartOffset()); off < to; {
		c, err := l.Read(off, 64<<20)
		if err != nil {
			return total, err
		}
		if len(c.Data) == 0 {
			break
		}
		total += int64(len(c.Data))
		off = c.NextOffset
		c.Release()
	}
	return total, nil
}

// Run runs the workload c and returns what it measured. progress, if not
// nil, gets a live display: one line rewritten in place on a terminal,
// else a line per second. Cancelling ctx ends the run early (the result
// says Interrupted). Errors wrap ErrUsage or ErrUnavailable when c is the
// problem.
func Run(ctx context.Context, c Config, progress io.Writer) (*Result, error) {
	p, err := c.parse()
	if err != nil {
		return nil, err
	}
	if err := engine.ValidateTopic(c.Topic); err != nil {
		return nil, usagef("--topic: %v", err)
	}
	if c.Quiet {
		progress = nil
	}
	res := &Result{Workload: c.Workload(), Host: Host{
		GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH,
		NumCPU: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0),
	}}
	// Output files are created first, so that a bad path fails before the
	// run rather than after it, as a usage error; the plot's too, written
	// at the end. (Without this: the plot's path was first tried after the
	// run.)
	var cpuFile, traceFile, memFile, plotFile *os.File
	for _, o := range []struct {
		flag, path string
		f          **os.File
	}{{"cpuprofile", c.CPUProfile, &cpuFile}, {"trace", c.Trace, &traceFile}, {"memprofile", c.MemProfile, &memFile}, {"plot", c.Plot, &plotFile}} {
		if o.path == "" {
			continue
		}
		f, err := os.Create(o.path)
		if err != nil {
			return nil, usagef("--%s: %v", o.flag, err)
		}
		defer f.Close()
		*o.f = f
	}

	dir := c.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "idemlog-bench-"); err != nil {
			return nil, err
		}
		res.DirRemoved = true
		defer os.RemoveAll(dir)
	}
	res.Dir = dir
	if progress != nil {
		// The run writes gigabytes in seconds: say where, and how much
		// stays on disk.
		where := "kept"
		if res.DirRemoved {
			where = "temporary, removed at the end"
		}
		bound := "no retention: every byte written stays until the end"
		if c.RetentionBytes > 0 {
			seg := c.SegmentBytes
			if seg == 0 {
				seg = segment.DefaultMaxBytes
			}
			bound = fmt.Sprintf("retention keeps at most %s of segments on disk", sizeString(float64(int64(c.Partitions)*(c.RetentionBytes+seg))))
		}
		fmt.Fprintf(progress, "bench: data in %s (%s); %s\n", dir, where, bound)
	}
	for i := range c.Partitions {
		pdir := filepath.Join(dir, fmt.Sprintf("%s-%d", c.Topic, i))
		if _, err := os.Stat(pdir); err == nil {
			res.Reopened = true
			if _, err := os.Stat(filepath.Join(pdir, ".kafka_cleanshutdown")); err != nil {
				res.Recovered = true
			}
		}
	}

	popts := partition.Options{
		Sync:         p.sync,
		MaxBatchSize: c.maxBatchSize(),
		Segment:      segment.Options{MaxBytes: c.SegmentBytes},
	}
	if c.RetentionBytes > 0 {
		popts.RetentionBytes, popts.RetentionAge = c.RetentionBytes, -1
	}
	e, err := engine.Open(dir, engine.Options{Partition: popts})
	if err != nil {
		return nil, err
	}
	closed := false
	defer func() {
		if !closed {
			e.Close()
		}
	}()
	if n, ok := e.Topics()[c.Topic]; ok && n != c.Partitions {
		// The run would write and read part of the topic and report it
		// as the whole.
		return nil, usagef("--partitions %d: the data dir's topic %q has %d", c.Partitions, c.Topic, n)
	}
	if err := e.CreateTopic(c.Topic, c.Partitions); err != nil {
		return nil, err
	}
	if err := fenceLeftoverTxns(e); err != nil {
		return nil, err
	}
	parts := make([]*engine.Partition, c.Partitions)
	stats := make([]partStat, c.Partitions)
	res.PartitionOffsets = make([]PartitionOffsets, c.Partitions)
	for i := range parts {
		if parts[i], err = e.Partition(c.Topic, i); err != nil {
			return nil, err
		}
		l := e.Frontend().Log(parts[i])
		res.PartitionOffsets[i] = PartitionOffsets{Partition: i, StartOffset: l.LogEndOffset()}
		stats[i].lastRP.Store(l.RecoveryPoint())
	}

	pool := payloadPool(c.Payload, c.Seed, c.RecordSize, c.Batch)
	g := newGate(c.Producers + c.Readers)
	prods := make([]*producer, c.Producers)
	for i := range prods {
		pr := &producer{
			observeSyncs: p.sync.Kind == partition.SyncAlways || p.sync.Kind == partition.SyncBytes,
			part:         parts[i%c.Partitions],
			log:          e.Frontend().Log(parts[i%c.Partitions]),
			stat:         &stats[i%c.Partitions],
			bld:          batch.NewBuilder(p.codec),
			cur:          newCursor(pool, c.RecordSize, i),
			hist:         hdrhistogram.New(1, histMax, 3),
			quota:        -1,
			gate:         g,
		}
		if c.Records > 0 {
			pr.quota = c.Records / int64(c.Producers)
			if int64(i) < c.Records%int64(c.Producers) {
				pr.quota++
			}
		}
		switch {
		case p.txn:
			pr.txnBatches = c.TxnBatches
			if pr.txn, err = e.NewTransactionalProducer(fmt.Sprintf("bench-%d", i), time.Minute); err != nil {
				return nil, err
			}
		case !p.plain:
			if pr.prod, err = e.NewProducer(); err != nil {
				return nil, err
			}
		}
		prods[i] = pr
	}
	readers := make([]*reader, c.Readers)
	for i := range readers {
		r := &reader{committed: c.Isolation == "read_committed", gate: g}
		if c.Readers <= c.Partitions {
			for j := i; j < c.Partitions; j += c.Readers {
				r.parts = append(r.parts, parts[j])
			}
		} else {
			r.parts = []*engine.Partition{parts[i%c.Partitions]}
		}
		readers[i] = r
	}

	if cpuFile != nil {
		if err := pprof.StartCPUProfile(cpuFile); err != nil {
			return nil, err
		}
	}
	if traceFile != nil {
		if err := trace.Start(traceFile); err != nil {
			if cpuFile != nil {
				pprof.StopCPUProfile()
			}
			return nil, err
		}
	}

	var stop, writersDone, abort, interrupted atomic.Bool
	// halt ends an interleaved run's slice early: a failure or a signal.
	halt := make(chan struct{})
	var haltOnce sync.Once
	haltNow := func() { haltOnce.Do(func() { close(halt) }) }
	interleave := c.BaselineMax > 0 && c.Slice > 0
	if interleave {
		// The producers and readers wait at the gate until the first
		// slice opens it, so that every slice's clock starts when the
		// engine does.
		g.closed.Store(true)
	}
	syncs0 := make([]int64, len(parts))
	for i, part := range parts {
		syncs0[i] = e.Frontend().Log(part).Syncs()
	}
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	cpu0 := sysstat.CPUTime()
	dev0, devOK := sysstat.DeviceWrittenBytes(dir)
	start := time.Now()
	if p.duration > 0 && !interleave {
		t := time.AfterFunc(p.duration, func() { stop.Store(true) })
		defer t.Stop()
	}
	defer context.AfterFunc(ctx, func() {
		interrupted.Store(true)
		stop.Store(true)
		haltNow()
	})()

	smp := newSampler(start, prods, readers, progress, c, p.duration)
	smpDone := make(chan struct{})
	if interleave {
		// The interleaved run samples between slices, on the engine's
		// clock (slices.go).
		close(smpDone)
	} else {
		go func() {
			defer close(smpDone)
			smp.loop()
		}()
	}

	var errMu sync.Mutex
	var errs []error
	fail := func(err error) {
		errMu.Lock()
		errs = append(errs, err)
		errMu.Unlock()
		stop.Store(true)
		abort.Store(true)
		haltNow()
	}
	var rwg sync.WaitGroup
	readEnd := make([]time.Time, len(readers))
	for i, r := range readers {
		rwg.Go(func() {
			if err := r.run(&writersDone, &abort); err != nil {
				fail(err)
			}
			readEnd[i] = time.Now()
		})
	}
	// Retention, as a server's periodic check would apply it (Kafka's
	// every 5 minutes; here often enough to keep up with the writers).
	var retained sync.WaitGroup
	var deleted atomic.Int64
	recycled0 := make([]int64, len(parts))
	for i, part := range parts {
		recycled0[i] = e.Frontend().Log(part).Recycled()
	}
	if c.RetentionBytes > 0 {
		retained.Go(func() {
			for !writersDone.Load() {
				n, err := e.Frontend().ApplyRetention()
				if err != nil {
					fail(err)
					return
				}
				deleted.Add(int64(n))
				time.Sleep(RetentionEvery)
			}
		})
	}
	var pwg sync.WaitGroup
	for _, pr := range prods {
		pwg.Go(func() {
			if err := pr.run(&stop, p.codec, c.Batch); err != nil {
				fail(err)
			}
		})
	}
	producersDone := make(chan struct{})
	go func() {
		pwg.Wait()
		close(producersDone)
	}()
	var il *interleaved
	var seconds float64
	if interleave {
		il = newInterleaved(ctx, c, p, dir, prods, parts, e.Frontend(), g, smp, pool)
		seconds, err = il.run(halt, producersDone)
		if err != nil {
			fail(err)
		}
		stop.Store(true)
		g.open()
	}
	<-producersDone
	end := time.Now()
	runtime.ReadMemStats(&ms1)
	cpu1 := sysstat.CPUTime()
	dev1, devOK1 := sysstat.DeviceWrittenBytes(dir)
	writersDone.Store(true)
	rwg.Wait()
	retained.Wait()
	res.SegmentsDeleted = deleted.Load()
	for i, part := range parts {
		res.SegmentsRecycled += e.Frontend().Log(part).Recycled() - recycled0[i]
		res.Syncs += e.Frontend().Log(part).Syncs() - syncs0[i]
	}
	if interleave {
		il.finish()
	} else {
		smp.finish(end)
	}
	<-smpDone
	if traceFile != nil {
		trace.Stop()
	}
	if cpuFile != nil {
		pprof.StopCPUProfile()
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	res.Interrupted = interrupted.Load()

	// The figures.
	res.Seconds = end.Sub(start).Seconds()
	res.CPUSeconds = (cpu1 - cpu0).Seconds()
	res.DeviceWrittenBytes = -1
	if devOK && devOK1 {
		res.DeviceWrittenBytes = dev1 - dev0
	}
	if interleave {
		// The engine's own slices: the baseline's are its own figures.
		res.Seconds, res.CPUSeconds, res.DeviceWrittenBytes = seconds, il.cpu.Seconds(), il.engineDevice
	}
	merged := hdrhistogram.New(1, histMax, 3)
	for _, pr := range prods {
		res.Records += pr.records.Load()
		res.Batches += pr.batches.Load()
		res.PayloadBytes += pr.payload.Load()
		merged.Merge(pr.hist)
	}
	for i := range stats {
		res.SyncsObserved += stats[i].syncs.Load()
	}
	for i, part := range parts {
		l := e.Frontend().Log(part)
		po := &res.PartitionOffsets[i]
		po.EndOffset = l.HighWatermark()
		n, err := logBytes(part, po.StartOffset, po.EndOffset)
		if err != nil {
			return nil, fmt.Errorf("cannot measure partition %d: %w", i, err)
		}
		res.Bytes += n
	}
	if c.RetentionBytes > 0 {
		// Retention deleted some of it: the producers' count (batches
		// and their transactions' COMMIT markers).
		res.Bytes = 0
		for _, pr := range prods {
			res.Bytes += pr.logged.Load()
		}
	}
	if res.Records > 0 {
		res.CPUNsPerRecord = res.CPUSeconds * 1e9 / float64(res.Records)
	}
	if c.RetentionBytes > 0 {
		seg := c.SegmentBytes
		if seg == 0 {
			seg = segment.DefaultMaxBytes
		}
		res.DiskBoundBytes = int64(c.Partitions) * (c.RetentionBytes + seg)
	}
	if s := res.Seconds; s > 0 {
		res.RecordsPerSec = float64(res.Records) / s
		res.BytesPerSec = float64(res.Bytes) / s
		res.PayloadBytesPerSec = float64(res.PayloadBytes) / s
	}
	us := func(q float64) float64 { return float64(merged.ValueAtQuantile(q)) / 1e3 }
	res.LatencyUs = Latency{P50: us(50), P90: us(90), P99: us(99), P999: us(99.9),
		Max: float64(merged.Max()) / 1e3, Mean: merged.Mean() / 1e3}
	res.LatencyScope = "Producer.Send (build + append + ack wait)"
	if p.txn {
		res.LatencyScope = "TransactionalProducer.Send (build + append + ack wait; every --txn-batches-th batch also its Commit)"
	}
	if p.plain {
		res.LatencyScope = "Builder.Build + Partition.Append (build + append + ack wait)"
	}
	if res.Batches > 0 {
		res.AllocsPerBatch = float64(ms1.Mallocs-ms0.Mallocs) / float64(res.Batches)
	}
	if len(readers) > 0 {
		last := start
		for i, r := range readers {
			res.ReadRecords += r.records.Load()
			res.ReadBytes += r.bytes.Load()
			if readEnd[i].After(last) {
				last = readEnd[i]
			}
		}
		res.ReadSeconds = last.Sub(start).Seconds()
		if res.ReadSeconds > 0 {
			res.ReadRecordsPerSec = float64(res.ReadRecords) / res.ReadSeconds
			res.ReadBytesPerSec = float64(res.ReadBytes) / res.ReadSeconds
		}
	}
	res.Timeline = smp.samples

	if memFile != nil {
		runtime.GC()
		if err := pprof.WriteHeapProfile(memFile); err != nil {
			return nil, err
		}
	}

	// What follows can take seconds (syncing what never was, writing up
	// to a GiB twice): say so, on the progress line.
	status := func(msg string) {}
	if progress != nil {
		term := isTerminal(progress)
		status = func(msg string) {
			switch {
			case term && msg == "":
				fmt.Fprint(progress, "\r\x1b[K")
			case term:
				fmt.Fprintf(progress, "\r\x1b[Kbench: %s", msg)
			case msg != "":
				fmt.Fprintf(progress, "bench: %s\n", msg)
			}
		}
		defer status("")
	}
	status("closing the engine (final syncs)...")
	t := time.Now()
	closed = true
	if err := e.Close(); err != nil {
		return nil, fmt.Errorf("cannot close the engine: %w", err)
	}
	res.CloseSeconds = time.Since(t).Seconds()

	if il != nil {
		il.fill(res)
	}
	switch {
	case res.Bytes == 0 || c.BaselineMax == 0 || ctx.Err() != nil:
	case il != nil:
		status(fmt.Sprintf("measuring the baseline's informative figures (at most %v each)...", min(c.BaselineMax, informativeMax)))
	default:
		status(fmt.Sprintf("measuring the baseline on %s...", sizeString(float64(baselineBytes(dir, res.Bytes)))))
	}
	if err := runBaseline(ctx, dir, c, p, res); err != nil {
		return nil, err
	}
	if plotFile != nil {
		if err := writePlotTo(plotFile, c.Plot, res); err != nil {
			return nil, err
		}
	}
	for _, f := range []*os.File{cpuFile, traceFile, memFile} {
		if f != nil {
			if err := f.Close(); err != nil {
				return nil, err
			}
		}
	}
	return res, nil
}

// sampleInterval is the timeline's resolution and the progress display's
// period; tests shorten it.
var sampleInterval = time.Second

// sampler takes the per-second samples and shows progress.
type sampler struct {
	start    time.Time
	prods    []*producer
	readers  []*reader
	out      io.Writer
	terminal bool
	cfg      Config
	duration time.Duration
	// note ends the progress line (the interleaved run's ratio so far).
	note string

	ticker  *time.Ticker
	stop    chan time.Time
	last    time.Time
	records int64
	payload int64
	read    int64
	counts  [numBuckets]uint64
	samples []Sample
}

func newSampler(start time.Time, prods []*producer, readers []*reader, out io.Writer, c Config, d time.Duration) *sampler {
	return &sampler{start: start, prods: prods, readers: readers, out: out, terminal: out != nil && isTerminal(out),
		cfg: c, duration: d, ticker: time.NewTicker(sampleInterval), stop: make(chan time.Time, 1), last: start}
}

func (s *sampler) loop() {
	defer s.ticker.Stop()
	for {
		select {
		case <-s.ticker.C:
			// The counters are read now, whenever the tick was.
			s.sample(time.Now(), true)
		case end := <-s.stop:
			// The timeline must add up to the run's records and end where
			// the run does. (Without this: a last slice under 10 ms was
			// dropped, and ticks after the end overran it.)
			s.foldAfter(end)
			switch {
			case !end.After(s.last):
			case end.Sub(s.last) >= 10*time.Millisecond || len(s.samples) == 0 || s.unsampled():
				// The last slice is taken however short it is when it
				// holds records.
				s.sample(end, false)
			default:
				// A short slice with nothing in it: the last sample is
				// stretched to the end.
				s.retimeLast(end)
			}
			if s.terminal {
				fmt.Fprint(s.out, "\r\x1b[K")
			}
			return
		}
	}
}

// unsampled reports whether records were acknowledged since the last
// sample.
func (s *sampler) unsampled() bool {
	var records int64
	for _, pr := range s.prods {
		records += pr.records.Load()
	}
	return records != s.records
}

// foldAfter folds the samples taken after end (ticks between the last
// acknowledgement and finish) into one slice ending at end: they hold only
// records acknowledged before it.
func (s *sampler) foldAfter(end time.Time) {
	endT := end.Sub(s.start).Seconds()
	k := len(s.samples)
	for k > 0 && s.samples[k-1].T > endT {
		k--
	}
	if k == len(s.samples) {
		return
	}
	m := s.samples[k]
	from := m.T - m.Seconds
	payload, read := m.PayloadBytesPerSec*m.Seconds, m.ReadRecordsPerSec*m.Seconds
	for _, x := range s.samples[k+1:] {
		m.Records += x.Records
		payload += x.PayloadBytesPerSec * x.Seconds
		read += x.ReadRecordsPerSec * x.Seconds
		m.P99Us, m.MaxUs = max(m.P99Us, x.P99Us), max(m.MaxUs, x.MaxUs)
	}
	m.T, m.Seconds = endT, endT-from
	s.samples = s.samples[:k]
	if m.Seconds > 0 {
		m.RecordsPerSec = float64(m.Records) / m.Seconds
		m.PayloadBytesPerSec, m.ReadRecordsPerSec = payload/m.Seconds, read/m.Seconds
		s.samples = append(s.samples, m)
	} else if k > 0 {
		s.samples[k-1].Records += m.Records // a slice of no time: its records go to the one before
	}
	s.last = end
}

// retimeLast makes the last sample end at end, its rates over the
// changed slice.
func (s *sampler) retimeLast(end time.Time) {
	smp := &s.samples[len(s.samples)-1]
	old := smp.Seconds
	smp.Seconds += end.Sub(s.last).Seconds()
	if smp.Seconds <= 0 {
		return
	}
	smp.T = end.Sub(s.start).Seconds()
	scale := old / smp.Seconds
	smp.RecordsPerSec *= scale
	smp.PayloadBytesPerSec *= scale
	smp.ReadRecordsPerSec *= scale
	s.last = end
}

// finish takes the last sample, at end, and stops the loop.
func (s *sampler) finish(end time.Time) { s.stop <- end }

func (s *sampler) sample(now time.Time, show bool) {
	var records, payload, read int64
	s.counts = [numBuckets]uint64{}
	for _, pr := range s.prods {
		records += pr.records.Load()
		payload += pr.payload.Load()
		pr.ival.drainInto(&s.counts)
	}
	for _, r := range s.readers {
		read += r.records.Load()
	}
	dt := now.Sub(s.last).Seconds()
	if dt <= 0 {
		return
	}
	smp := Sample{
		T:                  now.Sub(s.start).Seconds(),
		Seconds:            dt,
		Records:            records - s.records,
		RecordsPerSec:      float64(records-s.records) / dt,
		PayloadBytesPerSec: float64(payload-s.payload) / dt,
		P99Us:              float64(quantile(&s.counts, 0.99)) / 1e3,
		MaxUs:              float64(quantile(&s.counts, 1)) / 1e3,
		ReadRecordsPerSec:  float64(read-s.read) / dt,
	}
	s.samples = append(s.samples, smp)
	s.last, s.records, s.payload, s.read = now, records, payload, read
	if !show || s.out == nil {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "bench %5.1fs  %s records/s  %s/s  p99 %s  %s records",
		smp.T, countString(int64(smp.RecordsPerSec)), sizeString(smp.PayloadBytesPerSec), usString(smp.P99Us), countString(records))
	if len(s.readers) > 0 {
		fmt.Fprintf(&b, "  read %s records/s", countString(int64(smp.ReadRecordsPerSec)))
	}
	b.WriteString(s.note)
	if s.cfg.Records > 0 {
		fmt.Fprintf(&b, "  %3.0f%%", 100*float64(records)/float64(s.cfg.Records))
	} else if s.duration > 0 {
		fmt.Fprintf(&b, "  %3.0f%%", min(100, 100*smp.T/s.duration.Seconds()))
	}
	if s.terminal {
		fmt.Fprintf(s.out, "\r\x1b[K%s", b.String())
	} else {
		fmt.Fprintln(s.out, b.String())
	}
}

// countCommitted counts the records a read_committed consumer sees: batches
// of aborted transactions and control batches are dropped.
func countCommitted(data []byte, f *txnindex.Filter) (records int64, err error) {
	it := batch.NewIter(data)
	for it.Next() {
		b := it.Batch()
		abort := false
		if b.IsControl() && b.RecordsCount() > 0 {
			if ctl, err := b.Control(); err == nil {
				abort = ctl.Type == batch.ControlAbort
			}
		}
		if f.Skip(txnindex.Batch{ProducerID: b.ProducerID(), LastOffset: b.LastOffset(),
			Transactional: b.IsTransactional(), Control: b.IsControl(), AbortMarker: abort}) {
			continue
		}
		records += int64(b.RecordsCount())
	}
	return records, it.Err()
}
