package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// StorageConfig is the storage comparison's workload: every peer writes
// Records records of each size in Sizes, PerBatch to a batch, under each
// durability in Durabilities, for at most MaxTime per run.
type StorageConfig struct {
	Records  int   `json:"records"`
	Sizes    []int `json:"sizes"`
	PerBatch int   `json:"per_batch"`
	// Durabilities: "none" (no sync), "batch" (one writer, a sync per
	// batch), "group" (Writers writers at once, each batch acknowledged
	// once synced: a peer that shares one sync among the batches waiting
	// for it, group commit, goes faster).
	Durabilities []string      `json:"durabilities"`
	Writers      int           `json:"writers"`
	MaxTime      time.Duration `json:"max_time_ns"`
	Rounds       int           `json:"rounds"`
	Peers        []string      `json:"peers"`
	// Dir holds each run's directory (removed after the run).
	Dir string `json:"dir"`
}

// workload is one cell of the comparison.
type workload struct {
	Size     int  `json:"size"`
	PerBatch int  `json:"per_batch"`
	Sync     bool `json:"sync"`
	// Writers write at once, each its own batches; above 1 (the group
	// durability), a peer must accept concurrent writes (laner).
	Writers int `json:"writers"`
	// Records is the most a run writes, for peers that preallocate.
	Records int `json:"-"`
}

func (w workload) String() string {
	s := "no sync"
	switch {
	case w.Sync && w.Writers > 1:
		s = fmt.Sprintf("group commit, %d writers", w.Writers)
	case w.Sync:
		s = "sync per batch"
	case w.Writers > 1:
		s = fmt.Sprintf("no sync, %d writers", w.Writers)
	}
	return fmt.Sprintf("%d B x %d/batch, %s", w.Size, w.PerBatch, s)
}

// storageWriter is one peer opened on a fresh directory.
type storageWriter interface {
	// write stores one batch of records (a sync included when the
	// workload syncs) and returns once the peer acknowledges it.
	write(recs [][]byte) error
	// finish, still timed, gets what write left buffered into the peer's
	// files (pebble's LogWriter writes from a goroutine of its own).
	finish() error
	close() error
}

// laner is a storageWriter that several goroutines write to at once (the
// group durability): lane(i) is goroutine i's handle, called before the
// clock starts. Each lane is used by one goroutine; different lanes'
// writes run concurrently, and each returns once its batch is
// acknowledged (synced, when the workload syncs), so that a peer that
// group-commits shares one sync among every batch waiting for it.
type laner interface {
	lane(i int) (lane, error)
}

// lane is one writer of a laner.
type lane interface {
	write(recs [][]byte) error
}

type storagePeer struct {
	name string
	// what the peer's write is, for the report.
	about string
	open  func(dir string, w workload) (storageWriter, error)
}

// storagePeers lists every peer; a peer that could not be built would be
// missing here, and its file says why.
var storagePeers = []storagePeer{rawPeer, rawZeroedPeer, rawExtendPeer, idemlogPeer, idemlogPwritePeer, idemlogRecycledPeer, idemlogKafkaPeer, kfakePeer, natsPeer, pebblePeer, pebbleRecycledPeer}

// StorageRun is one peer's run of one workload in one round.
type StorageRun struct {
	Round    int      `json:"round"`
	Peer     string   `json:"peer"`
	Workload workload `json:"workload"`
	// Truncated: MaxTime ended the run before Records were written.
	Truncated bool  `json:"truncated"`
	Phase     Phase `json:"phase"`
}

// StorageReport is the JSON report of `peers storage`.
type StorageReport struct {
	Host    Host              `json:"host"`
	Config  StorageConfig     `json:"config"`
	Peers   map[string]string `json:"peers"`
	Runs    []StorageRun      `json:"runs"`
	Summary []Summary         `json:"summary"`
}

func storageCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("peers storage", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := StorageConfig{}
	fs.IntVar(&c.Records, "records", 100_000, "records per run (fewer if -max-time ends it)")
	sizes := fs.String("sizes", "100,1024", "record value `bytes` (random), one workload each")
	fs.IntVar(&c.PerBatch, "batch", 100, "records per batch")
	durs := fs.String("durability", "none,batch,group", "durabilities, one workload each: none (no sync), batch (a sync per batch, one writer), group (-writers writers, each batch acknowledged once synced)")
	syncs := fs.String("sync", "", "old form of -durability: false (none), true (batch), or false,true")
	fs.IntVar(&c.Writers, "writers", 16, "concurrent writers under -durability group")
	fs.DurationVar(&c.MaxTime, "max-time", 2*time.Second, "end a run after this long")
	fs.IntVar(&c.Rounds, "rounds", 3, "rounds; peers alternate within each")
	var names []string
	for _, p := range storagePeers {
		names = append(names, p.name)
	}
	peers := fs.String("peers", strings.Join(names, ","), "peers to run")
	fs.StringVar(&c.Dir, "dir", os.TempDir(), "`DIR` for the runs' directories")
	jsonPath := fs.String("json", "", "also write every figure as JSON to `FILE`")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var err error
	if c.Sizes, err = intList(*sizes); err != nil {
		return err
	}
	if *syncs != "" {
		*durs = strings.NewReplacer("false", "none", "true", "batch").Replace(*syncs)
	}
	for d := range strings.SplitSeq(*durs, ",") {
		switch d = strings.TrimSpace(d); d {
		case "none", "batch", "group":
			c.Durabilities = append(c.Durabilities, d)
		default:
			return fmt.Errorf("cannot parse -durability %q: %w", *durs, errUsage)
		}
	}
	c.Peers = strings.Split(*peers, ",")
	if c.Records <= 0 || c.PerBatch <= 0 || c.Rounds <= 0 || c.Writers <= 0 {
		return fmt.Errorf("-records, -batch, -rounds and -writers must be positive: %w", errUsage)
	}
	rep, err := runStorage(ctx, c, stderr)
	if err != nil {
		return err
	}
	if err := printSummaries(stdout, rep.Summary); err != nil {
		return err
	}
	return writeJSON(*jsonPath, rep)
}

func runStorage(ctx context.Context, c StorageConfig, progress io.Writer) (*StorageReport, error) {
	// Names are trimmed once, here: the summary matches runs by them.
	// (Without this: " idemlog" ran but fell out of the summary.)
	c.Peers = trimAll(c.Peers)
	var peers []storagePeer
	for _, name := range c.Peers {
		i := indexPeer(name)
		if i < 0 {
			return nil, fmt.Errorf("cannot use peer %q: %w", name, errUsage)
		}
		peers = append(peers, storagePeers[i])
	}
	rep := &StorageReport{Host: host(), Config: c, Peers: map[string]string{}}
	for _, p := range peers {
		rep.Peers[p.name] = p.about
	}
	var wls []workload
	for _, d := range c.Durabilities {
		for _, size := range c.Sizes {
			w := workload{Size: size, PerBatch: c.PerBatch, Sync: d != "none", Writers: 1, Records: c.Records}
			if d == "group" {
				w.Writers = c.Writers
			}
			wls = append(wls, w)
		}
	}
	for round := range c.Rounds {
		for _, w := range wls {
			for i := range peers {
				p := peers[(i+round)%len(peers)]
				if err := ctx.Err(); err != nil {
					return rep, err
				}
				run, err := storageOnce(c, p, w, round)
				if err != nil {
					return rep, fmt.Errorf("%s %v round %d: %w", p.name, w, round, err)
				}
				rep.Runs = append(rep.Runs, run)
				fmt.Fprintf(progress, "round %d %-13s %-28v %10.0f rec/s  batch p50 %6.0f us  cpu %.2f us/rec\n",
					round, p.name, w, run.Phase.RecordsPerSec, run.Phase.BatchLatencyUs.P50, run.Phase.CPUUsPerRecord)
			}
		}
	}
	for _, w := range wls {
		byPeer := map[string][]Phase{}
		for _, r := range rep.Runs {
			if r.Workload == w {
				byPeer[r.Peer] = append(byPeer[r.Peer], r.Phase)
			}
		}
		rep.Summary = append(rep.Summary, summarize(w.String(), c.Peers, byPeer, "idemlog", "raw", "raw-zeroed")...)
	}
	return rep, nil
}

func indexPeer(name string) int {
	for i, p := range storagePeers {
		if p.name == name {
			return i
		}
	}
	return -1
}

// storageOnce opens p on a fresh directory and writes the workload.
func storageOnce(c StorageConfig, p storagePeer, w workload, round int) (StorageRun, error) {
	run := StorageRun{Round: round, Peer: p.name, Workload: w}
	dir, err := os.MkdirTemp(c.Dir, "peers-"+p.name+"-")
	if err != nil {
		return run, fmt.Errorf("cannot create run dir: %w", err)
	}
	defer os.RemoveAll(dir)
	settle()
	sw, err := p.open(dir, w)
	if err != nil {
		return run, err
	}
	lanes := []lane{sw}
	if w.Writers > 1 {
		lr, ok := sw.(laner)
		if !ok {
			sw.close()
			return run, fmt.Errorf("%s takes one writer at a time", p.name)
		}
		lanes = lanes[:0]
		for i := range w.Writers {
			l, err := lr.lane(i)
			if err != nil {
				sw.close()
				return run, fmt.Errorf("cannot open writer %d: %w", i, err)
			}
			lanes = append(lanes, l)
		}
	}
	// Writers claim batches from one budget of records, so that a run
	// writes Records in all, whatever the number of writers.
	var left atomic.Int64
	left.Store(int64(c.Records))
	claim := func() int {
		for {
			n := left.Load()
			if n <= 0 {
				return 0
			}
			k := min(int64(w.PerBatch), n)
			if left.CompareAndSwap(n, n-k) {
				return int(k)
			}
		}
	}
	results := make([]laneResult, len(lanes))
	pls := make([]*payload, len(lanes))
	for i := range pls {
		pls[i] = newPayload(w.Size, uint64(2+i))
	}
	ph := &run.Phase
	m := startMeter(dir)
	deadline := m.begin.Add(c.MaxTime)
	if len(lanes) == 1 {
		results[0] = drive(lanes[0], claim, pls[0], w.PerBatch, deadline)
	} else {
		var wg sync.WaitGroup
		for i, l := range lanes {
			wg.Go(func() { results[i] = drive(l, claim, pls[i], w.PerBatch, deadline) })
		}
		wg.Wait()
	}
	var lat []int64
	for _, r := range results {
		if err == nil {
			err = r.err
		}
		run.Truncated = run.Truncated || r.truncated
		ph.Records += r.records
		ph.PayloadBytes += r.records * int64(w.Size)
		lat = append(lat, r.lat...)
	}
	if err == nil {
		err = sw.finish()
	}
	ph.finish(m)
	ph.BatchLatencyUs = latencyOf(lat)
	if cerr := sw.close(); err == nil && cerr != nil {
		err = fmt.Errorf("cannot close: %w", cerr)
	}
	return run, err
}

// laneResult is what one writer of a run did.
type laneResult struct {
	records   int64
	lat       []int64 // per batch, ns
	truncated bool
	err       error
}

// drive writes batches through l, as many records as claim grants each
// time, until claim grants none, deadline passes, or a write fails.
func drive(l lane, claim func() int, pl *payload, perBatch int, deadline time.Time) laneResult {
	var r laneResult
	recs := make([][]byte, perBatch)
	for {
		if time.Now().After(deadline) {
			r.truncated = true
			return r
		}
		n := claim()
		if n == 0 {
			return r
		}
		for i := range n {
			recs[i] = pl.next()
		}
		t0 := time.Now()
		if r.err = l.write(recs[:n]); r.err != nil {
			return r
		}
		r.lat = append(r.lat, int64(time.Since(t0)))
		r.records += int64(n)
	}
}

// trimAll returns names with the spaces around each removed.
func trimAll(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = strings.TrimSpace(n)
	}
	return out
}
