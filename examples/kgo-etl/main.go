// Command kgo-etl is a consume-process-produce service written once
// against a plain Kafka client (franz-go's kgo) and run either on an
// idemlog engine embedded in the same process or on any Kafka cluster.
//
// It reads lines from one topic read_committed, writes each upper-cased to
// another, and commits its consumer group's offsets in the same
// transaction, so each committed input yields
// exactly one visible output whatever crashes or rebalances happen.
//
// The only difference between the two deployments is how the client
// connects: embedded, the seed is any name and kgo.Dialer hands every
// connection to the engine's server in memory (kafka.Server.Dial); on a
// cluster, the seeds are the brokers and there is no dialer.
//
//	go run ./examples/kgo-etl --dir /tmp/etl             # embedded
//	go run ./examples/kgo-etl --brokers 127.0.0.1:9092   # a cluster, or idemlog serve
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	dir := flag.String("dir", "", "run embedded on the idemlog data `DIR`")
	brokers := flag.String("brokers", "", "run on the Kafka cluster at `HOST:PORT[,...]`")
	in := flag.String("in", "lines", "input `TOPIC`")
	out := flag.String("out", "upper", "output `TOPIC`")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var conn []kgo.Opt
	switch {
	case *dir != "" && *brokers == "":
		e, err := engine.Open(*dir, engine.Options{})
		if err != nil {
			fail(err)
		}
		defer e.Close()
		srv, err := kafka.New(e, kafka.Options{AutoCreateTopics: true})
		if err != nil {
			fail(err)
		}
		defer srv.Close()
		conn = embedded(srv)
	case *brokers != "" && *dir == "":
		conn = cluster(strings.Split(*brokers, ","))
	default:
		fmt.Fprintln(os.Stderr, "kgo-etl: give --dir or --brokers")
		os.Exit(2)
	}
	if err := process(ctx, conn, *in, *out, "kgo-etl", nil); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "kgo-etl:", err)
	os.Exit(1)
}

// embedded connects to an engine served in this process: no socket, the
// server's Dial is the client's dialer (the seed's name is not used).
func embedded(srv *kafka.Server) []kgo.Opt {
	return []kgo.Opt{kgo.SeedBrokers("idemlog"), kgo.Dialer(srv.Dial)}
}

// cluster connects to Kafka brokers (or `idemlog serve`).
func cluster(seeds []string) []kgo.Opt {
	return []kgo.Opt{kgo.SeedBrokers(seeds...)}
}

// process is the service: everything after the connection options is the
// same wherever it runs. It returns when ctx is done, or after each
// committed transaction's records were handed to committed (nil: none),
// when committed returns false.
func process(ctx context.Context, conn []kgo.Opt, in, out, group string, committed func(n int) bool) error {
	etl, err := kgo.NewGroupTransactSession(append(conn,
		kgo.TransactionalID(group+"-etl"),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(in),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DefaultProduceTopic(out),
	)...)
	if err != nil {
		return fmt.Errorf("cannot create the client: %w", err)
	}
	defer etl.Close()
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := etl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		var fetchErr error
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && fetchErr == nil {
				fetchErr = fmt.Errorf("cannot fetch %s/%d: %w", t, p, err)
			}
		})
		if fetchErr != nil {
			return fetchErr
		}
		if fs.NumRecords() == 0 {
			continue
		}
		if err := etl.Begin(); err != nil {
			return fmt.Errorf("cannot begin a transaction: %w", err)
		}
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			n++
			etl.Produce(ctx, &kgo.Record{Key: r.Key, Value: bytes.ToUpper(r.Value)}, nil)
		})
		ok, err := etl.End(ctx, kgo.TryCommit)
		if err != nil {
			return fmt.Errorf("cannot end a transaction: %w", err)
		}
		if ok && committed != nil && !committed(n) {
			return nil
		}
	}
}
