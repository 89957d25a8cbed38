package engine

import (
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// partitionDir is a partition directory Open found.
type partitionDir struct {
	name  string
	topic string
	index int
}

// openedPartition is what openPartition made of one.
type openedPartition struct {
	p     *Partition
	hasID bool
}

// ioWorkers is how many partitions Open and Close handle at once. Their
// cost is I/O (a recovery's reads and syncs, a clean close's syncs),
// which runs in parallel on a device and, for syncs, shares journal
// commits; the CPU they take scales with the cores.
func ioWorkers(n int) int {
	return max(1, min(n, 4*runtime.GOMAXPROCS(0), 64))
}

// openPartitions opens dirs in parallel (ioWorkers at a time), logging
// progress every defaultOpenProgressEvery while it lasts: a data dir that was
// not closed cleanly has every partition's tail scanned. On error it
// stops taking new directories and returns the first error (in dirs'
// order) with whatever it opened, for the caller to close.
func openPartitions(dataDir string, dirs []partitionDir, opts *Options, engineClosed *atomic.Bool) ([]openedPartition, error) {
	out := make([]openedPartition, len(dirs))
	errs := make([]error, len(dirs))
	var next, done atomic.Int64
	var failed atomic.Bool
	stop, stopped := make(chan struct{}), make(chan struct{})
	start := time.Now()
	every := opts.private.openProgressEvery
	if every <= 0 {
		every = defaultOpenProgressEvery
	}
	go func() {
		defer close(stopped)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				opts.Logger.Info("opening partitions", "dir", dataDir, "opened", done.Load(), "of", len(dirs), "elapsed", time.Since(start).Round(time.Second))
			}
		}
	}()
	var wg sync.WaitGroup
	for range ioWorkers(len(dirs)) {
		wg.Go(func() {
			for !failed.Load() {
				i := int(next.Add(1)) - 1
				if i >= len(dirs) {
					return
				}
				d := dirs[i]
				p, hasID, err := openPartition(filepath.Join(dataDir, d.name), d.topic, d.index, opts, engineClosed)
				if err != nil {
					errs[i] = err
					failed.Store(true)
					return
				}
				out[i] = openedPartition{p: p, hasID: hasID}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	close(stop)
	<-stopped
	if d := time.Since(start); d >= every {
		opts.Logger.Info("opened partitions", "dir", dataDir, "partitions", done.Load(), "elapsed", d.Round(time.Millisecond))
	}
	for _, err := range errs {
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// closePartitions closes parts cleanly, ioWorkers at a time, and returns
// their errors. A partition left dormant since Open (never used) closes
// without a syscall; each of the others syncs its own files, seals and
// writes its checkpoints and marker (partition.Log.Close), and those
// fsyncs, issued together, share the filesystem's journal commits. A
// partition's clean-shutdown marker is written only after its own files
// are durable, whatever the others do, so each marker still promises
// exactly what it did when partitions closed one by one.
func closePartitions(parts map[string]*Partition) []error {
	list := make([]*Partition, 0, len(parts))
	for _, p := range parts {
		list = append(list, p)
	}
	errs := make([]error, len(list))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range ioWorkers(len(list)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(list) {
					return
				}
				errs[i] = list[i].close()
			}
		})
	}
	wg.Wait()
	return errs
}
