package main

import (
	"fmt"
	"time"

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

func (iw *idemlogWriter) finish() error { return nil }
func (iw *idemlogWriter) close() error  { return iw.eng.Close() }
