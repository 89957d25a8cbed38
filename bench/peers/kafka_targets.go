package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/kafka"
	"github.com/idemlog/idemlog/partition"
	"github.com/idemlog/idemlog/segment"
)

// broker is one Kafka-protocol server under test, started fresh for every
// measurement so that no run inherits another's data, heap or page cache
// state, and closed (its data dropped) before the next.
type broker interface {
	addr() string
	close() error
}

// target names a broker kind and starts one with a topic of n partitions.
type target struct {
	name  string
	start func(topic string, partitions int) (broker, error)
}

// kafkaTargets returns the targets named: kfake; idemlog (fsync never,
// the engine's default write mode: small batches through the mapping,
// large ones with pwritev, a maintainer goroutine prefaulting the
// mapping); idemlog-always (fsync per request, which also means pwritev
// only and no prefaulting); idemlog-pwrite (fsync never, pwritev only: the
// prefaulting's share of the never figures).
func kafkaTargets(names []string, tmp string) ([]target, error) {
	var out []target
	for _, name := range names {
		var opts partition.Options
		switch name = strings.TrimSpace(name); name {
		case "kfake":
			out = append(out, target{name, startKfake})
			continue
		case "idemlog":
		case "idemlog-always":
			opts.Sync.Kind = partition.SyncAlways
		case "idemlog-pwrite":
			opts.Segment.Mode = segment.WritePwrite
		default:
			return nil, fmt.Errorf("cannot use target %q: want kfake, idemlog, idemlog-always or idemlog-pwrite: %w", name, errUsage)
		}
		out = append(out, target{name, func(topic string, n int) (broker, error) {
			return startIdemlog(tmp, opts, topic, n)
		}})
	}
	return out, nil
}

// serverSide runs f with the pprof label side=server, which every goroutine
// that f starts inherits: `go tool pprof -tagfocus side=server` then keeps
// the broker's own work apart from the client's in one process.
func serverSide(f func()) {
	pprof.Do(context.Background(), pprof.Labels("side", "server"), func(context.Context) { f() })
}

type kfakeBroker struct{ c *kfake.Cluster }

func startKfake(topic string, partitions int) (broker, error) {
	var c *kfake.Cluster
	var err error
	serverSide(func() {
		c, err = kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(partitions), topic))
	})
	if err != nil {
		return nil, fmt.Errorf("cannot start kfake: %w", err)
	}
	return kfakeBroker{c}, nil
}

func (k kfakeBroker) addr() string { return k.c.ListenAddrs()[0] }
func (k kfakeBroker) close() error { k.c.Close(); return nil }

type idemlogBroker struct {
	eng    *engine.Engine
	srv    *kafka.Server
	ln     net.Listener
	dir    string
	served chan error
}

// startIdemlog opens an engine in a fresh directory under tmp with the
// given partition options, creates the topic and serves it on
// 127.0.0.1:0, as `idemlog serve` does minus the metrics.
func startIdemlog(tmp string, opts partition.Options, topic string, partitions int) (broker, error) {
	dir, err := os.MkdirTemp(tmp, "idemlog-peers-")
	if err != nil {
		return nil, fmt.Errorf("cannot create data dir: %w", err)
	}
	b := &idemlogBroker{dir: dir, served: make(chan error, 1)}
	serverSide(func() {
		b.eng, err = engine.Open(dir, engine.Options{Partition: opts})
		if err != nil {
			err = fmt.Errorf("cannot open engine: %w", err)
			return
		}
		if err = b.eng.CreateTopic(topic, partitions); err != nil {
			err = fmt.Errorf("cannot create topic: %w", err)
			return
		}
		if b.srv, err = kafka.New(b.eng, kafka.Options{}); err != nil {
			err = fmt.Errorf("cannot start kafka server: %w", err)
			return
		}
		if b.ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			err = fmt.Errorf("cannot listen: %w", err)
			return
		}
		go func() { b.served <- b.srv.Serve(b.ln) }()
	})
	if err != nil {
		b.close()
		return nil, err
	}
	return b, nil
}

func (b *idemlogBroker) addr() string { return b.ln.Addr().String() }

// close stops the server (Serve returns once its connections are done),
// closes the engine and removes its directory. It also undoes a partial
// start: fields left nil were never set up.
func (b *idemlogBroker) close() error {
	var errs []error
	if b.srv != nil {
		errs = append(errs, b.srv.Close())
		if b.ln != nil { // Serve was started right after Listen
			errs = append(errs, <-b.served)
		}
	}
	if b.eng != nil {
		if err := b.eng.Close(); err != nil {
			errs = append(errs, fmt.Errorf("cannot close engine: %w", err))
		}
	}
	if err := os.RemoveAll(b.dir); err != nil {
		errs = append(errs, fmt.Errorf("cannot remove data dir: %w", err))
	}
	return errors.Join(errs...)
}
