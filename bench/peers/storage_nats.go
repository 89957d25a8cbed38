package main

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsPeer is NATS JetStream embedded: a file-storage stream, one client
// on the server's in-process connection (no TCP), every message
// published asynchronously with a Nats-Msg-Id header so that the stream
// deduplicates it (JetStream's counterpart of an idempotent producer), a
// batch's acknowledgements awaited together. JetStream syncs per message,
// not per batch: with the workload's sync its store runs with
// sync_interval: always, which fsyncs every message write.
var natsPeer = storagePeer{name: "nats", about: "JetStream file stream, PublishAsync with Nats-Msg-Id per record, batch's acks awaited (sync_interval always: fsync per message)", open: openNATS}

type natsWriter struct {
	srv  *server.Server
	nc   *nats.Conn
	js   jetstream.JetStream
	seq  *atomic.Int64 // message ids, shared by the lanes
	acks []jetstream.PubAckFuture
	ctx  context.Context
}

func openNATS(dir string, w workload) (storageWriter, error) {
	opts := &server.Options{JetStream: true, StoreDir: dir, DontListen: true, NoLog: true, NoSigs: true,
		JetStreamMaxStore: 64 << 30}
	if w.Sync {
		opts.SyncAlways = true
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("cannot create nats server: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, fmt.Errorf("cannot start nats server: not ready after 10s")
	}
	nw := &natsWriter{srv: srv, ctx: context.Background(), seq: new(atomic.Int64)}
	if err := nw.connect(); err != nil {
		nw.close()
		return nil, err
	}
	return nw, nil
}

func (nw *natsWriter) connect() error {
	var err error
	if nw.nc, err = nats.Connect("", nats.InProcessServer(nw.srv)); err != nil {
		return fmt.Errorf("cannot connect to nats: %w", err)
	}
	if nw.js, err = jetstream.New(nw.nc); err != nil {
		return fmt.Errorf("cannot open jetstream: %w", err)
	}
	_, err = nw.js.CreateStream(nw.ctx, jetstream.StreamConfig{Name: "PEERS", Subjects: []string{kafkaTopic},
		Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute})
	if err != nil {
		return fmt.Errorf("cannot create stream: %w", err)
	}
	return nil
}

// lane shares the connection (its publishes are pipelined with the
// others'), awaiting only its own batch's acknowledgements. JetStream has
// no group commit to offer: under sync_interval always each message is
// synced on its own, so more writers only queue more syncs.
func (nw *natsWriter) lane(int) (lane, error) {
	return &natsWriter{srv: nw.srv, nc: nw.nc, js: nw.js, seq: nw.seq, ctx: nw.ctx}, nil
}

func (nw *natsWriter) write(recs [][]byte) error {
	nw.acks = nw.acks[:0]
	for _, v := range recs {
		id := nw.seq.Add(1)
		f, err := nw.js.PublishAsync(kafkaTopic, v, jetstream.WithMsgID(strconv.FormatInt(id, 10)))
		if err != nil {
			return fmt.Errorf("cannot publish: %w", err)
		}
		nw.acks = append(nw.acks, f)
	}
	for _, f := range nw.acks {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("cannot publish: %w", err)
		}
	}
	return nil
}

func (nw *natsWriter) finish() error { return nil }

func (nw *natsWriter) close() error {
	if nw.nc != nil {
		nw.nc.Close()
	}
	nw.srv.Shutdown()
	nw.srv.WaitForShutdown()
	return nil
}
