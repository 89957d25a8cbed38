//go:build linux

package bench

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/idemlog/idemlog/bench/sysstat"
	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/partition"
	"github.com/idemlog/idemlog/segment"
)

// interleaved runs the engine and its baseline in alternating slices of
// Config.Slice, on the same directory: the engine for a slice (the gate
// open), then the baseline for as long as that slice took (producers and
// readers parked at the gate), and so on to the end of the run. Each pair
// of slices gives a ratio, whose median and spread are reported; the
// figure is the pooled ratio over the pairs (RatioSpread.Pooled). Both sides of a
// pair meet the same page cache, the same writeback and the same
// neighbours on a shared machine within a fraction of a second, which a
// baseline measured after the run, in one block, does not: there the run's
// dirty pages were still being written back, and other tenants' load came
// and went between the two (ratios of 0.27 to 0.87 for the same command,
// run after run).
//
// Where neither side waits for the device (fsync never, interval) both
// are bound by the CPU, and a pair's ratio is taken per second of the CPU
// time the process could have had in each slice: its own CPU time plus
// the machine's idle time. On a quiet machine that is the wall-clock
// ratio (the process's cores are its own); on a shared one it leaves out
// what other processes took, which changes from one slice to the next
// faster than slices alternate: with 2 cores and a load average of 15-20,
// the wall-clock medians of eight 3 s runs spread over 0.52-0.80, these
// over 0.63-0.77. Under always and bytes=N the appenders wait for the
// device, and the ratio is taken over wall-clock time.
//
// The figure is pooled (the engine's bytes over its CPU seconds in all
// its slices, over the baseline's), not the median of the pairs' ratios:
// a 25 ms slice on a loaded machine is a noisy measurement (single pairs
// ranged 0.07-19), and the median of 40-70 of them moved by -13% to +20%
// over six quick-start runs where the pooled ratio moved by -12% to +12%.
// Pooling weighs each slice by the CPU time it had, so a slice in which
// the process was starved weighs little.
type interleaved struct {
	ctx   context.Context
	c     Config
	p     parsed
	dir   string
	prods []*producer
	parts []*engine.Partition
	fe    engine.Frontend // reads the partitions' sync counts
	g     *gate
	smp   *sampler
	ring  *baselineRing

	synced bool // the baseline syncs (fsync always, bytes=N)
	syncs0 []int64

	pairs []slicePair
	// engineSecs, cpu: the engine's slices' time and the process's CPU
	// time during them. engineDevice, baselineDevice: bytes the device
	// wrote during each side's slices (-1: not readable here).
	engineSecs     float64
	cpu            time.Duration
	engineDevice   int64
	baselineDevice int64
	baselineBytes  int64
	baselineSecs   float64
	chunk, group   int64
	lastSample     float64
}

func newInterleaved(ctx context.Context, c Config, p parsed, dir string, prods []*producer, parts []*engine.Partition, fe engine.Frontend, g *gate, smp *sampler, pool []byte) *interleaved {
	il := &interleaved{ctx: ctx, c: c, p: p, dir: dir, prods: prods, parts: parts, fe: fe, g: g, smp: smp,
		synced: p.sync.Kind == partition.SyncAlways || p.sync.Kind == partition.SyncBytes}
	for _, part := range parts {
		il.syncs0 = append(il.syncs0, il.fe.Log(part).Syncs())
	}
	// As many writers as partitions written, each into its own files
	// (each partition writes, and syncs, its own segment): the baseline
	// then has as many threads as the engine to run, and on a machine
	// shared with other processes gets the same share of the cores. With
	// one writer against four producers the ratio rose with the
	// neighbours' load.
	writers := max(1, min(c.Partitions, c.Producers))
	seg := c.SegmentBytes
	if seg == 0 {
		seg = segment.DefaultMaxBytes
	}
	il.ring = newBaselineRing(dir, seg, ringKeep(dir, c), p.sync.Kind == partition.SyncAlways, writers, pool)
	if _, ok := sysstat.DeviceWrittenBytes(dir); !ok {
		il.engineDevice, il.baselineDevice = -1, -1
	}
	return il
}

// ringKeep is the bytes of full files the baseline keeps in all: what the
// engine's retention keeps (retention.bytes per partition), or, for a run
// without retention, up to half the free space the directory had at the
// start.
func ringKeep(dir string, c Config) int64 {
	if c.RetentionBytes > 0 {
		return c.RetentionBytes * int64(c.Partitions)
	}
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) == nil {
		return int64(st.Bavail) * st.Bsize / 2
	}
	return maxBaselineBytes
}

// counts returns the bytes and batches the producers have appended.
func (il *interleaved) counts() (bytes, batches int64) {
	for _, pr := range il.prods {
		bytes += pr.logged.Load()
		batches += pr.batches.Load()
	}
	return bytes, batches
}

func (il *interleaved) syncs() int64 {
	var n int64
	for i, part := range il.parts {
		n += il.fe.Log(part).Syncs() - il.syncs0[i]
	}
	return n
}

func (il *interleaved) device(from int64, ok bool, acc *int64) {
	if !ok || *acc < 0 {
		*acc = -1
		return
	}
	if to, ok := sysstat.DeviceWrittenBytes(il.dir); ok {
		*acc += to - from
	} else {
		*acc = -1
	}
}

// run alternates the slices until the run's duration of engine time is
// spent, the producers are done (records mode), or halt is closed (a
// failure or a signal; no baseline slice follows then). It returns the
// engine's time. The gate is closed when it returns.
func (il *interleaved) run(halt, producersDone <-chan struct{}) (float64, error) {
	il.g.close()
	slice := il.c.Slice.Seconds()
	for {
		d := nextSlice(slice, il.p.duration.Seconds(), il.engineSecs)
		if d <= 0 {
			return il.engineSecs, nil
		}
		bytes0, _ := il.counts()
		cpu0 := sysstat.CPUTime()
		idle0, idleOK := sysstat.MachineIdle()
		dev0, devOK := sysstat.DeviceWrittenBytes(il.dir)
		t0 := time.Now()
		il.g.open()
		timer := time.NewTimer(time.Duration(d * float64(time.Second)))
		last, halted := false, false
		select {
		case <-timer.C:
		case <-producersDone:
			last = true
		case <-halt:
			halted = true
		}
		timer.Stop()
		il.g.close()
		took := time.Since(t0)
		cpu1 := sysstat.CPUTime()
		idle1, idleOK1 := sysstat.MachineIdle()
		il.cpu += cpu1 - cpu0
		engineAvail := 0.0
		if idleOK && idleOK1 {
			engineAvail = (cpu1 - cpu0 + idle1 - idle0).Seconds()
		}
		il.device(dev0, devOK, &il.engineDevice)
		il.engineSecs += took.Seconds()
		bytes1, batches1 := il.counts()
		il.sampleIfDue()
		if halted {
			return il.engineSecs, nil
		}
		if batches1 > 0 {
			il.chunk = max(1, bytes1/batches1)
		} else {
			il.chunk = int64(il.c.maxBatchSize())
		}
		il.group = 0
		if il.synced {
			il.group = 1
			if n := il.syncs(); n > 0 {
				il.group = max(1, (batches1+n/2)/n)
			}
		}
		dev0, devOK = sysstat.DeviceWrittenBytes(il.dir)
		cpu0 = sysstat.CPUTime()
		idle0, idleOK = sysstat.MachineIdle()
		n, secs, err := il.ring.slice(il.ctx, il.chunk, il.group, took)
		cpu1 = sysstat.CPUTime()
		idle1, idleOK1 = sysstat.MachineIdle()
		baselineAvail := 0.0
		if idleOK && idleOK1 {
			baselineAvail = (cpu1 - cpu0 + idle1 - idle0).Seconds()
		}
		if err == nil {
			err = il.ring.settle()
		}
		if err != nil {
			if il.ctx.Err() != nil {
				return il.engineSecs, nil
			}
			return il.engineSecs, err
		}
		il.device(dev0, devOK, &il.baselineDevice)
		if il.ctx.Err() != nil {
			// A slice cut short by a signal is no measurement.
			return il.engineSecs, nil
		}
		il.baselineBytes += n
		il.baselineSecs += secs
		il.pairs = append(il.pairs, slicePair{engineBytes: bytes1 - bytes0, engineSeconds: took.Seconds(),
			baselineBytes: n, baselineSeconds: secs, engineCPU: engineAvail, baselineCPU: baselineAvail})
		if last {
			return il.engineSecs, nil
		}
		select {
		case <-producersDone:
			return il.engineSecs, nil
		default:
		}
	}
}

// sampleIfDue takes a timeline sample once a sample interval of engine
// time has passed since the last one: the timeline runs on the engine's
// clock, the baseline's slices left out.
func (il *interleaved) sampleIfDue() {
	if il.engineSecs-il.lastSample < sampleInterval.Seconds() {
		return
	}
	ratio := slicePair.cpuRatio
	if il.synced {
		ratio = slicePair.ratio
	}
	if sp := spreadOf(il.pairs, ratio); sp.Slices > 0 {
		il.smp.note = fmt.Sprintf("  %.2fx baseline so far", sp.Pooled)
	}
	il.smp.sample(il.engineNow(), true)
	il.lastSample = il.engineSecs
}

func (il *interleaved) engineNow() time.Time {
	return il.smp.start.Add(time.Duration(il.engineSecs * float64(time.Second)))
}

// finish takes the timeline's last sample and removes the baseline's
// files.
func (il *interleaved) finish() {
	il.ring.remove()
	if end := il.engineNow(); end.After(il.smp.last) {
		il.smp.sample(end, false)
	}
	if il.smp.terminal {
		fmt.Fprint(il.smp.out, "\r\x1b[K")
	}
}

// fill puts the baseline's figures and the ratio into res.
func (il *interleaved) fill(res *Result) {
	bl := &res.Baseline
	bl.When = "interleaved"
	bl.SliceSeconds = il.c.Slice.Seconds()
	bl.ChunkBytes = il.chunk
	bl.RingBytes = il.ring.bytesOnDisk()
	bl.DeviceWrittenBytes = il.baselineDevice
	bl.ComparedWith = "write"
	bl.SyncGroup, bl.SyncGroupSource = int64(il.c.Producers), "producers"
	if il.synced {
		bl.ComparedWith = "write_fdatasync"
		bl.SyncGroup, bl.SyncGroupSource = il.group, "observed"
		bl.SyncWriters = len(il.ring.writers)
	}
	rate := 0.0
	if il.baselineSecs > 0 {
		rate = float64(il.baselineBytes) / il.baselineSecs
	}
	if il.synced {
		bl.WriteFdatasyncBytes, bl.WriteFdatasyncBytesPerSec = il.baselineBytes, rate
	} else {
		bl.WriteBytes, bl.WriteBytesPerSec = il.baselineBytes, rate
	}
	res.WallRatioSpread = spreadOf(il.pairs, slicePair.ratio)
	res.RatioBasis, res.RatioSpread = "wall", res.WallRatioSpread
	if !il.synced {
		if sp := spreadOf(il.pairs, slicePair.cpuRatio); sp.Slices > 0 {
			res.RatioBasis, res.RatioSpread = "cpu_available", sp
		}
	}
	res.RatioToBaseline = res.RatioSpread.Pooled
}
