package main

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/idemlog/idemlog/partition"
)

// kfakePeer is franz-go's in-process Kafka with its disk persistence on
// (DataDir; SyncWrites when the workload syncs: an fsync per produced
// batch), written to by kgo's idempotent producer over loopback TCP.
var kfakePeer = storagePeer{name: "kfake", about: "kfake with DataDir (+SyncWrites), kgo idempotent producer, one Produce request per batch", open: openKfake}

// idemlogKafkaPeer is the same client against idemlog's Kafka listener: it
// shows what the protocol hop costs next to the in-process engine, on
// the same footing as kfake.
var idemlogKafkaPeer = storagePeer{name: "idemlog-kafka", about: "kafka.Server on the engine (fsync never / always), kgo idempotent producer, one Produce request per batch", open: openIdemlogKafka}

func openKfake(dir string, w workload) (storageWriter, error) {
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(1, kafkaTopic), kfake.DataDir(dir)}
	if w.Sync {
		opts = append(opts, kfake.SyncWrites())
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("cannot start kfake: %w", err)
	}
	return newKgoWriter(kfakeBroker{c})
}

func openIdemlogKafka(dir string, w workload) (storageWriter, error) {
	var opts partition.Options
	if w.Sync {
		opts.Sync.Kind = partition.SyncAlways
	}
	b, err := startIdemlog(dir, opts, kafkaTopic, 1)
	if err != nil {
		return nil, err
	}
	return newKgoWriter(b)
}

// kgoWriter produces each batch as one record batch in one Produce
// request: with manual flushing kgo buffers the batch's records until
// Flush, which sends them together (well under the 1 MB batch limit) and
// waits for the acknowledgement (acks=all).
type kgoWriter struct {
	b   broker
	cl  *kgo.Client
	ctx context.Context
	err atomic.Pointer[error] // the first failed record's
	// lanes: the other writers' clients (the group durability), closed
	// with this one.
	lanes []*kgoWriter
}

func newKgoWriter(b broker) (*kgoWriter, error) {
	cl, err := newKgoProducer(b)
	if err != nil {
		b.close()
		return nil, err
	}
	return &kgoWriter{b: b, cl: cl, ctx: context.Background()}, nil
}

func newKgoProducer(b broker) (*kgo.Client, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr()), kgo.DefaultProduceTopic(kafkaTopic),
		kgo.ManualFlushing(), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		return nil, fmt.Errorf("cannot create producer: %w", err)
	}
	return cl, nil
}

// lane is another client, so another idempotent producer with its own
// connection, as concurrent producer processes would be: the broker sees
// the writers' Produce requests at once, and syncs them as it does.
func (k *kgoWriter) lane(int) (lane, error) {
	cl, err := newKgoProducer(k.b)
	if err != nil {
		return nil, err
	}
	l := &kgoWriter{b: k.b, cl: cl, ctx: k.ctx}
	k.lanes = append(k.lanes, l)
	return l, nil
}

func (k *kgoWriter) write(recs [][]byte) error {
	for _, v := range recs {
		k.cl.Produce(k.ctx, &kgo.Record{Value: v}, k.promise)
	}
	if err := k.cl.Flush(k.ctx); err != nil {
		return fmt.Errorf("cannot flush: %w", err)
	}
	if err := k.err.Load(); err != nil {
		return fmt.Errorf("cannot produce: %w", *err)
	}
	return nil
}

// promise keeps the first error.
func (k *kgoWriter) promise(_ *kgo.Record, err error) {
	if err != nil {
		k.err.CompareAndSwap(nil, &err)
	}
}

func (k *kgoWriter) finish() error { return nil }

func (k *kgoWriter) close() error {
	for _, l := range k.lanes {
		l.cl.Close()
	}
	k.cl.Close()
	return k.b.close()
}
