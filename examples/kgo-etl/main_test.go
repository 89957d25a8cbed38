package main

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
)

// startEngine opens an engine in a temp dir with its Kafka server (not
// listening anywhere yet) and the topics the service uses.
func startEngine(t *testing.T) *kafka.Server {
	t.Helper()
	e, err := engine.Open(t.TempDir(), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"lines", "upper"} {
		if err := e.CreateTopic(topic, 2); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := kafka.New(e, kafka.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Close()
		e.Close()
	})
	return srv
}

// runService feeds the service committed and aborted input through conn,
// runs it until it has committed every committed input, and checks the
// output: each committed line once, upper-cased, nothing of the aborted
// transaction.
func runService(t *testing.T, conn []kgo.Opt) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	prod, err := kgo.NewClient(append(conn, kgo.TransactionalID("feeder"), kgo.DefaultProduceTopic("lines"))...)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	var want []string
	for i, commit := range []bool{true, false, true, true} {
		if err := prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for j := range 50 {
			line := fmt.Sprintf("line %d.%d %v", i, j, commit)
			if err := prod.ProduceSync(ctx, &kgo.Record{Key: []byte{byte(j)}, Value: []byte(line)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			if commit {
				want = append(want, strings.ToUpper(line))
			}
		}
		if err := prod.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	done := 0
	if err := process(ctx, conn, "lines", "upper", "etl-test", func(n int) bool {
		done += n
		return done < len(want)
	}); err != nil {
		t.Fatal(err)
	}
	if done != len(want) {
		t.Fatalf("service committed %d inputs; want %d", done, len(want))
	}
	cons, err := kgo.NewClient(append(conn, kgo.ConsumeTopics("upper"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var got []string
	for len(got) < len(want) {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d outputs of %d: %v", len(got), len(want), ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	// Anything more (a duplicate) would arrive within a short poll.
	pctx, pcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	cons.PollFetches(pctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	pcancel()
	sort.Strings(got)
	sort.Strings(want)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("outputs (%d) differ from the committed inputs upper-cased (%d)", len(got), len(want))
	}
}

// TestServiceEmbedded runs the service on an engine in this process,
// reached through the server's in-memory dialer.
func TestServiceEmbedded(t *testing.T) {
	runService(t, embedded(startEngine(t)))
}

// TestServiceOverTCP runs the same service on the same kind of server,
// reached over loopback TCP as a Kafka cluster would be: only the
// connection options differ.
func TestServiceOverTCP(t *testing.T) {
	srv := startEngine(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	runService(t, cluster([]string{ln.Addr().String()}))
}
