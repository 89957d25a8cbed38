package main

import (
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/partition"
	"github.com/idemlog/idemlog/segment"
)

// idemlogPeer is the engine in-process, as an embedding application uses
// it: one idempotent producer (engine.Producer.Send: producer id, sequence
// numbers, deduplication) appending uncompressed Kafka record batches to
// one partition, under fsync never or always (one fdatasync per batch: a
// single producer has nobody to share its syncs with).
var idemlogPeer = storagePeer{name: "idemlog", about: "engine.Producer.Send of a batch.Builder batch, fsync never / always",
	open: func(dir string, w workload) (storageWriter, error) { return openIdemlog(dir, w, segment.WriteDefault) }}

// idemlogPwritePeer is the same with pwritev only (no stores through the
// mapping, no prefaulting of it): the prefaulting's share of the figures.
var idemlogPwritePeer = storagePeer{name: "idemlog-pwrite", about: "idemlog with segment.WritePwrite",
	open: func(dir string, w workload) (storageWriter, error) { return openIdemlog(dir, w, segment.WritePwrite) }}

type idemlogWriter struct {
	eng  *engine.Engine
	part *engine.Partition
	prod *engine.Producer
	bld  *batch.Builder
}

func openIdemlog(dir string, w workload, mode segment.WriteMode) (storageWriter, error) {
	eng, err := openEngine(dir, w.Sync, mode)
	if err != nil {
		return nil, err
	}
	iw := &idemlogWriter{eng: eng, bld: batch.NewBuilder(batch.CodecNone)}
	if iw.part, err = eng.Partition(kafkaTopic, 0); err == nil {
		iw.prod, err = eng.NewProducer()
	}
	if err != nil {
		eng.Close()
		return nil, fmt.Errorf("cannot set up producer: %w", err)
	}
	return iw, nil
}

// openEngine opens an engine in dir with one single-partition topic.
func openEngine(dir string, sync bool, mode segment.WriteMode) (*engine.Engine, error) {
	opts := partition.Options{Segment: segment.Options{Mode: mode}}
	if sync {
		opts.Sync.Kind = partition.SyncAlways
	}
	eng, err := engine.Open(dir, engine.Options{Partition: opts})
	if err != nil {
		return nil, fmt.Errorf("cannot open engine: %w", err)
	}
	if err := eng.CreateTopic(kafkaTopic, 1); err != nil {
		eng.Close()
		return nil, fmt.Errorf("cannot create topic: %w", err)
	}
	return eng, nil
}

func (iw *idemlogWriter) write(recs [][]byte) error {
	iw.bld.Reset(batch.CodecNone)
	ts := time.Now().UnixMilli()
	for _, v := range recs {
		iw.bld.Append(ts, nil, v, nil)
	}
	_, err := iw.prod.Send(iw.part, iw.bld)
	return err
}

// lane is another producer on the same partition (the group durability):
// its own producer id, sequence numbers and builder. Under fsync always
// the partition's syncs are shared: a producer whose batch is written
// waits for the sync in flight or leads the next, which covers every
// batch written meanwhile (partition.Log.WaitDurable).
func (iw *idemlogWriter) lane(int) (lane, error) {
	prod, err := iw.eng.NewProducer()
	if err != nil {
		return nil, fmt.Errorf("cannot create producer: %w", err)
	}
	return &idemlogWriter{eng: iw.eng, part: iw.part, prod: prod, bld: batch.NewBuilder(batch.CodecNone)}, nil
}

func (iw *idemlogWriter) finish() error { return nil }
func (iw *idemlogWriter) close() error  { return iw.eng.Close() }

// idemlogRecycledPeer is idemlog in the steady state of a log whose
// retention deletes segments as fast as it rolls (64 MiB segments, 128
// MiB retained, retention applied every 32 batches, as a server's periodic
// check would): with fsync always, each roll then takes the file of a
// deleted segment (segment.Recycle), written blocks, so syncs flush data
// only; files of batches under about 2.5 KiB are not recycled (zero fills
// serve small syncs). Off the clock, before the run, it writes batches of
// the workload's shape until its active segment is such a file: the
// counterpart of pebble-recycled.
var idemlogRecycledPeer = storagePeer{name: "idemlog-recycled", about: "idemlog in steady state with retention: 64 MiB segments, 128 MiB retained, each roll reusing a deleted segment's file (fsync always)",
	open: openIdemlogRecycled}

const (
	recycledSegmentBytes   = 64 << 20
	recycledRetentionBytes = 128 << 20
	recycledRetentionEvery = 32
)

type idemlogRecycledWriter struct {
	*idemlogWriter
	batches *atomic.Int64 // shared by the lanes
}

func openIdemlogRecycled(dir string, w workload) (storageWriter, error) {
	opts := partition.Options{RetentionAge: -1, RetentionBytes: recycledRetentionBytes,
		Segment: segment.Options{MaxBytes: recycledSegmentBytes}}
	if w.Sync {
		opts.Sync.Kind = partition.SyncAlways
	}
	eng, err := engine.Open(dir, engine.Options{Partition: opts})
	if err != nil {
		return nil, fmt.Errorf("cannot open engine: %w", err)
	}
	iw := &idemlogWriter{eng: eng, bld: batch.NewBuilder(batch.CodecNone)}
	if err = eng.CreateTopic(kafkaTopic, 1); err == nil {
		if iw.part, err = eng.Partition(kafkaTopic, 0); err == nil {
			iw.prod, err = eng.NewProducer()
		}
	}
	if err != nil {
		eng.Close()
		return nil, fmt.Errorf("cannot set up producer: %w", err)
	}
	rw := &idemlogRecycledWriter{idemlogWriter: iw, batches: new(atomic.Int64)}
	if err := rw.warmUp(w); err != nil {
		eng.Close()
		return nil, err
	}
	return rw, nil
}

// warmUp writes batches of the workload's shape until the active segment
// is a recycled file, then syncs the filesystem. Nothing recycles without sync
// (recycling follows zero fills), nor files of batches under about 2.5
// KiB (segment.Recycle: they get zero fills instead): below 4 KiB it does
// not warm up, and the peer is idemlog with small segments and retention.
func (rw *idemlogRecycledWriter) warmUp(w workload) error {
	if !rw.eng.Frontend().Log(rw.part).MustWait() || w.PerBatch*w.Size < 4<<10 {
		return nil
	}
	recs := make([][]byte, w.PerBatch)
	for i := range recs {
		recs[i] = make([]byte, w.Size)
	}
	perBatch := w.PerBatch * w.Size
	deadline := time.Now().Add(60 * time.Second)
	for written := 0; ; written += perBatch {
		log := rw.eng.Frontend().Log(rw.part)
		if log.ActiveRecycled() {
			// Let the device finish the warm-up's work (the deleted
			// segments' blocks, discarded on a filesystem mounted with
			// discard) before the clock starts, as the zero-filled peers
			// sync their files before theirs.
			return syncFS(log.Dir())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cannot warm up idemlog-recycled: %d files recycled after %d bytes", log.Recycled(), written)
		}
		if err := rw.idemlogWriter.write(recs); err != nil {
			return fmt.Errorf("cannot warm up idemlog-recycled: %w", err)
		}
		if written/perBatch%recycledRetentionEvery == 0 {
			if _, err := rw.eng.Frontend().ApplyRetention(); err != nil {
				return fmt.Errorf("cannot apply retention: %w", err)
			}
		}
	}
}

func (rw *idemlogRecycledWriter) write(recs [][]byte) error {
	if err := rw.idemlogWriter.write(recs); err != nil {
		return err
	}
	if rw.batches.Add(1)%recycledRetentionEvery == 0 {
		if _, err := rw.eng.Frontend().ApplyRetention(); err != nil {
			return fmt.Errorf("cannot apply retention: %w", err)
		}
	}
	return nil
}

// lane is another producer, counting its batches toward the retention
// schedule with the others.
func (rw *idemlogRecycledWriter) lane(i int) (lane, error) {
	l, err := rw.idemlogWriter.lane(i)
	if err != nil {
		return nil, err
	}
	return &idemlogRecycledWriter{idemlogWriter: l.(*idemlogWriter), batches: rw.batches}, nil
}

// syncFS syncs the filesystem holding dir.
func syncFS(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("cannot open %s: %w", dir, err)
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return fmt.Errorf("cannot sync filesystem: %w", err)
	}
	return nil
}
