package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// StorageConfig is the storage comparison's workload: every peer writes
// Records records of each size in Sizes, PerBatch to a batch, with and
// without a sync per batch, for at most MaxTime per run.
type StorageConfig struct {
	Records  int           `json:"records"`
	Sizes    []int         `json:"sizes"`
	PerBatch int           `json:"per_batch"`
	Syncs    []bool        `json:"syncs"`
	MaxTime  time.Duration `json:"max_time_ns"`
	Rounds   int           `json:"rounds"`
	Peers    []string      `json:"peers"`
	// Dir holds each run's directory (removed after the run).
	Dir string `json:"dir"`
}

// workload is one cell of the comparison.
type workload struct {
	Size     int  `json:"size"`
	PerBatch int  `json:"per_batch"`
	Sync     bool `json:"sync"`
	// Records is the most a run writes, for peers that preallocate.
	Records int `json:"-"`
}

func (w workload) String() string {
	s := "no sync"
	if w.Sync {
		s = "sync per batch"
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

type storagePeer struct {
	name string
	// what the peer's write is, for the report.
	about string
	open  func(dir string, w workload) (storageWriter, error)
}

// storagePeers lists every peer; a peer that could not be built would be
// missing here, and its file says why.
var storagePeers = []storagePeer{rawPeer, rawZeroedPeer, idemlogPeer, idemlogPwritePeer, idemlogRecycledPeer, idemlogKafkaPeer, kfakePeer, natsPeer, pebblePeer, pebbleRecycledPeer}

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
	syncs := fs.String("sync", "false,true", "sync per batch: false, true, or false,true for both (one workload each)")
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
	for s := range strings.SplitSeq(*syncs, ",") {
		switch strings.TrimSpace(s) {
		case "false":
			c.Syncs = append(c.Syncs, false)
		case "true":
			c.Syncs = append(c.Syncs, true)
		default:
			return fmt.Errorf("cannot parse -sync %q: %w", *syncs, errUsage)
		}
	}
	c.Peers = strings.Split(*peers, ",")
	if c.Records <= 0 || c.PerBatch <= 0 || c.Rounds <= 0 {
		return fmt.Errorf("-records, -batch and -rounds must be positive: %w", errUsage)
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
	for _, sync := range c.Syncs {
		for _, size := range c.Sizes {
			wls = append(wls, workload{Size: size, PerBatch: c.PerBatch, Sync: sync, Records: c.Records})
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
		if p.name == strings.TrimSpace(name) {
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
	pl := newPayload(w.Size, 2)
	recs := make([][]byte, w.PerBatch)
	var lat []int64
	ph := &run.Phase
	m := startMeter()
	for ph.Records < int64(c.Records) {
		if time.Since(m.begin) > c.MaxTime {
			run.Truncated = true
			break
		}
		n := min(w.PerBatch, c.Records-int(ph.Records))
		for i := range n {
			recs[i] = pl.next()
		}
		t0 := time.Now()
		if err = sw.write(recs[:n]); err != nil {
			break
		}
		lat = append(lat, int64(time.Since(t0)))
		ph.Records += int64(n)
		ph.PayloadBytes += int64(n * w.Size)
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
