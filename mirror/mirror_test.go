package mirror

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/internal/testutil/enginetest"
	"github.com/idemlog/idemlog/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
)

// withDir opens dir's engine, serves it in-process, and runs f with a
// client option set that reaches it; everything is closed after, so that
// Run can open the dir.
func withDir(t *testing.T, dir string, f func(e *engine.Engine, opts ...kgo.Opt)) {
	t.Helper()
	enginetest.Serve(t, dir, f)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// produceTxns writes, per partition, transactions alternately committed
// and aborted; it returns the committed records.
func produceTxns(t *testing.T, ctx context.Context, topic string, parts int32, txns int, tag string, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(append(opts, kgo.TransactionalID("source-"+tag), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var committed []*kgo.Record
	base := time.UnixMilli(1_700_000_000_000)
	for i := range txns {
		commit := i%3 != 1
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var batch []*kgo.Record
		for p := range parts {
			for j := range 3 {
				r := &kgo.Record{Topic: topic, Partition: p,
					Key:       fmt.Appendf(nil, "k-%s-%d-%d", tag, i, j),
					Value:     fmt.Appendf(nil, "v-%s-%d-%d-%d-%v", tag, i, p, j, commit),
					Headers:   []kgo.RecordHeader{{Key: "h", Value: []byte{byte(i), byte(j)}}},
					Timestamp: base.Add(time.Duration(i*10+j) * time.Millisecond)}
				if j == 2 {
					r.Value = nil // a tombstone stays one
					r.Key = []byte{}
				}
				batch = append(batch, r)
			}
		}
		if err := cl.ProduceSync(ctx, batch...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
		if commit {
			committed = append(committed, batch...)
		}
	}
	return committed
}

// readAll reads every record of topic read_committed, per partition.
func readAll(t *testing.T, ctx context.Context, topic string, parts int32, opts ...kgo.Opt) map[int32][]*kgo.Record {
	t.Helper()
	out := map[int32][]*kgo.Record{}
	cl, err := kgo.NewClient(append(opts, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := listOffsets(ctx, cl, map[string]int32{topic: parts}, -1, 1)
	if err != nil {
		t.Fatal(err)
	}
	done := func() bool {
		for p := range parts {
			n := len(out[p])
			if ends[tp{topic, p}] > 0 && (n == 0 || out[p][n-1].Offset < ends[tp{topic, p}]-2) {
				return false
			}
		}
		return true
	}
	for !done() {
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			t.Fatalf("reading %s: %v", topic, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) { out[r.Partition] = append(out[r.Partition], r) })
		if fs.NumRecords() == 0 {
			break // nothing more below the last stable offset
		}
	}
	return out
}

func sameRecord(a, b *kgo.Record) bool {
	return bytes.Equal(a.Key, b.Key) && (a.Key == nil) == (b.Key == nil) &&
		bytes.Equal(a.Value, b.Value) && (a.Value == nil) == (b.Value == nil) &&
		a.Timestamp.Equal(b.Timestamp) && a.Partition == b.Partition &&
		slices.EqualFunc(a.Headers, b.Headers, func(x, y kgo.RecordHeader) bool {
			return x.Key == y.Key && bytes.Equal(x.Value, y.Value)
		})
}

// TestRunCopiesCommittedRecordsOnceAndResumes copies a topic with
// committed and aborted transactions between two in-process dirs, then
// adds more and runs the mirror again: the destination holds each
// committed record once, in its partition and order, with key, value
// (null included), headers and timestamp, and no aborted one. A second
// run that started from the beginning instead of the stored positions
// would copy the first records twice.
func TestRunCopiesCommittedRecordsOnceAndResumes(t *testing.T) {
	ctx := ctxT(t)
	srcDir, dstDir := t.TempDir(), t.TempDir()
	var want []*kgo.Record
	withDir(t, srcDir, func(e *engine.Engine, opts ...kgo.Opt) {
		if err := e.CreateTopic("orders", 3, map[string]string{"retention.ms": "123456789"}); err != nil {
			t.Fatal(err)
		}
		if err := e.CreateTopic("other", 1); err != nil {
			t.Fatal(err)
		}
		want = produceTxns(t, ctx, "orders", 3, 6, "a", opts...)
	})
	run := func() {
		t.Helper()
		err := Run(ctx, Options{From: Endpoint{Dir: srcDir}, To: Endpoint{Dir: dstDir},
			Topics: regexp.MustCompile("^orders$"), StopAtEnd: true, Name: "m1"})
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	}
	run()
	withDir(t, srcDir, func(e *engine.Engine, opts ...kgo.Opt) {
		want = append(want, produceTxns(t, ctx, "orders", 3, 4, "b", opts...)...)
	})
	run()
	withDir(t, dstDir, func(e *engine.Engine, opts ...kgo.Opt) {
		topics := e.Topics()
		if topics["orders"] != 3 {
			t.Fatalf("destination topics %v; want orders with 3 partitions", topics)
		}
		if _, ok := topics["other"]; ok {
			t.Fatalf("topic other was copied though --topics excludes it")
		}
		cfg, err := e.Frontend().TopicConfig("orders")
		if err != nil {
			t.Fatal(err)
		}
		if i := slices.IndexFunc(cfg, func(c engine.ConfigEntry) bool { return c.Name == "retention.ms" }); i < 0 || cfg[i].Value != "123456789" || !cfg[i].Override {
			t.Fatalf("destination config %+v; want the source's retention.ms override", cfg)
		}
		// idemlog has no compaction: the positions must at least never
		// expire, or a quiet partition would be copied again.
		pcfg, err := e.Frontend().TopicConfig(DefaultPositionsTopic)
		if err != nil {
			t.Fatal(err)
		}
		value := func(name string) string {
			if i := slices.IndexFunc(pcfg, func(c engine.ConfigEntry) bool { return c.Name == name }); i >= 0 {
				return pcfg[i].Value
			}
			return ""
		}
		if policy := value("cleanup.policy"); strings.Contains(policy, "delete") && value("retention.ms") != "-1" {
			t.Fatalf("positions topic: cleanup.policy %q, retention.ms %q; want no deletion by age", policy, value("retention.ms"))
		}
		got := readAll(t, ctx, "orders", 3, opts...)
		for p := range int32(3) {
			var wantP []*kgo.Record
			for _, r := range want {
				if r.Partition == p {
					wantP = append(wantP, r)
				}
			}
			if len(got[p]) != len(wantP) {
				t.Fatalf("partition %d: %d records in the destination, want %d", p, len(got[p]), len(wantP))
			}
			for i := range wantP {
				if !sameRecord(got[p][i], wantP[i]) {
					t.Fatalf("partition %d record %d: got %+v, want %+v", p, i, got[p][i], wantP[i])
				}
			}
		}
	})
}

// TestRunRefusesDestinationWithFewerPartitions: partition numbers are
// kept, so a destination topic with fewer partitions cannot take the
// copy; the error says so and nothing is copied.
func TestRunRefusesDestinationWithFewerPartitions(t *testing.T) {
	ctx := ctxT(t)
	srcDir, dstDir := t.TempDir(), t.TempDir()
	withDir(t, srcDir, func(e *engine.Engine, opts ...kgo.Opt) {
		if err := e.CreateTopic("t", 4); err != nil {
			t.Fatal(err)
		}
		produceTxns(t, ctx, "t", 4, 1, "a", opts...)
	})
	withDir(t, dstDir, func(e *engine.Engine, opts ...kgo.Opt) {
		if err := e.CreateTopic("t", 2); err != nil {
			t.Fatal(err)
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("already here")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	})
	err := Run(ctx, Options{From: Endpoint{Dir: srcDir}, To: Endpoint{Dir: dstDir}, StopAtEnd: true})
	if !errors.Is(err, ErrDestinationRefused) {
		t.Fatalf("Run: %v; want ErrDestinationRefused", err)
	}
	withDir(t, dstDir, func(e *engine.Engine, opts ...kgo.Opt) {
		if n := e.Topics()["t"]; n != 2 {
			t.Fatalf("refused destination topic has %d partitions; want its 2 untouched", n)
		}
		if got := readAll(t, ctx, "t", 2, opts...); len(got[0])+len(got[1]) != 1 {
			t.Fatalf("destination got records %v after a refusal; want only its own", got)
		}
	})
}

// TestRunGrowsEmptyDestinationTopic: a destination topic with fewer
// partitions but no records is what a mirror killed while an idemlog
// destination created the topic (one partition dir at a time) leaves
// behind; the restarted mirror must grow it and copy, not refuse for ever.
func TestRunGrowsEmptyDestinationTopic(t *testing.T) {
	ctx := ctxT(t)
	srcDir, dstDir := t.TempDir(), t.TempDir()
	var want []*kgo.Record
	withDir(t, srcDir, func(e *engine.Engine, opts ...kgo.Opt) {
		if err := e.CreateTopic("t", 3); err != nil {
			t.Fatal(err)
		}
		want = produceTxns(t, ctx, "t", 3, 2, "a", opts...)
	})
	withDir(t, dstDir, func(e *engine.Engine, opts ...kgo.Opt) {
		if err := e.CreateTopic("t", 1); err != nil {
			t.Fatal(err)
		}
	})
	if err := Run(ctx, Options{From: Endpoint{Dir: srcDir}, To: Endpoint{Dir: dstDir}, StopAtEnd: true}); err != nil {
		t.Fatalf("Run: %v", err)
	}
	withDir(t, dstDir, func(e *engine.Engine, opts ...kgo.Opt) {
		if n := e.Topics()["t"]; n != 3 {
			t.Fatalf("destination topic has %d partitions; want 3", n)
		}
		got := readAll(t, ctx, "t", 3, opts...)
		if n := len(got[0]) + len(got[1]) + len(got[2]); n != len(want) {
			t.Fatalf("destination has %d records; want %d", n, len(want))
		}
	})
}

// TestRunWithoutMatchingTopicsFails: a --topics that matches nothing is a
// mistake to report, not a mirror that copies nothing for ever.
func TestRunWithoutMatchingTopicsFails(t *testing.T) {
	ctx := ctxT(t)
	err := Run(ctx, Options{From: Endpoint{Dir: t.TempDir()}, To: Endpoint{Dir: t.TempDir()},
		Topics: regexp.MustCompile("^nothing$"), StopAtEnd: true})
	if !errors.Is(err, ErrNoTopics) {
		t.Fatalf("Run: %v; want ErrNoTopics", err)
	}
}

// tcpServer serves a fresh engine on 127.0.0.1.
func tcpServer(t *testing.T) (*engine.Engine, string) {
	t.Helper()
	e, err := engine.Open(t.TempDir(), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := kafka.New(e, kafka.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() {
		srv.Close()
		e.Close()
	})
	return e, ln.Addr().String()
}

// TestRunPicksUpNewSourceTopics: a running mirror lists the source topics
// again (TopicScanInterval) and copies a topic created after it started,
// which a mirror that resolved its topics once would never copy.
func TestRunPicksUpNewSourceTopics(t *testing.T) {
	ctx := ctxT(t)
	srcEng, src := tcpServer(t)
	dstEng, dst := tcpServer(t)
	produce := func(topic string, parts int32) []*kgo.Record {
		if err := srcEng.CreateTopic(topic, int(parts)); err != nil {
			t.Fatal(err)
		}
		return produceTxns(t, ctx, topic, parts, 2, topic, kgo.SeedBrokers(src))
	}
	wait := func(topic string, parts int32, want int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			if _, ok := dstEng.Topics()[topic]; ok {
				got := readAll(t, ctx, topic, parts, kgo.SeedBrokers(dst))
				n := 0
				for _, rs := range got {
					n += len(rs)
				}
				if n == want {
					return
				}
				if n > want {
					t.Fatalf("destination %s has %d records; want %d", topic, n, want)
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("topic %s not copied within 30s", topic)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	first := produce("first", 1)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- Run(runCtx, Options{From: Endpoint{Brokers: []string{src}}, To: Endpoint{Brokers: []string{dst}},
			CommitInterval: 20 * time.Millisecond, TopicScanInterval: 100 * time.Millisecond})
	}()
	wait("first", 1, len(first))
	second := produce("second", 2)
	wait("second", 2, len(second))
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
}

// TestRunRefusesBadEndpoints: an endpoint that names nothing, or both a
// dir and brokers, or a source dir that does not exist (opening it would
// create an empty data dir where the user made a typo) fails before
// anything is opened or created.
func TestRunRefusesBadEndpoints(t *testing.T) {
	ctx := ctxT(t)
	missing := filepath.Join(t.TempDir(), "missing")
	for _, o := range []Options{
		{To: Endpoint{Dir: t.TempDir()}},
		{From: Endpoint{Dir: t.TempDir(), Brokers: []string{"127.0.0.1:1"}}, To: Endpoint{Dir: t.TempDir()}},
		{From: Endpoint{Dir: missing}, To: Endpoint{Dir: t.TempDir()}},
	} {
		if err := Run(ctx, o); !errors.Is(err, ErrEndpoint) {
			t.Errorf("Run(%+v): %v; want ErrEndpoint", o, err)
		}
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatalf("the missing source dir was created: %v", err)
	}
}

// TestPositionsSnapshotTrimsPositionsTopic: with a snapshot at every
// commit, the positions topic's older records are deleted (its log start
// moves up), and a mirror restarted on the trimmed topic still resumes
// where it stopped: a trim past the last position of a partition that the
// snapshot did not write again would make the next run copy that
// partition twice.
func TestPositionsSnapshotTrimsPositionsTopic(t *testing.T) {
	defer func(d time.Duration) { snapshotEvery = d }(snapshotEvery)
	snapshotEvery = 0
	ctx := ctxT(t)
	srcDir, dstDir := t.TempDir(), t.TempDir()
	var want []*kgo.Record
	withDir(t, srcDir, func(e *engine.Engine, opts ...kgo.Opt) {
		if err := e.CreateTopic("t", 2); err != nil {
			t.Fatal(err)
		}
		want = produceTxns(t, ctx, "t", 2, 3, "a", opts...)
	})
	run := func() {
		t.Helper()
		if err := Run(ctx, Options{From: Endpoint{Dir: srcDir}, To: Endpoint{Dir: dstDir}, StopAtEnd: true,
			CommitInterval: time.Millisecond, MaxTransactionRecords: 2}); err != nil {
			t.Fatalf("Run: %v", err)
		}
	}
	run()
	// Only partition 0 advances now: the trims of this run must keep
	// partition 1's position, which its transactions do not change.
	withDir(t, srcDir, func(e *engine.Engine, opts ...kgo.Opt) {
		want = append(want, produceTxns(t, ctx, "t", 1, 3, "b", opts...)...)
	})
	run()
	run()
	withDir(t, dstDir, func(e *engine.Engine, opts ...kgo.Opt) {
		p, err := e.Partition(DefaultPositionsTopic, 0)
		if err != nil {
			t.Fatal(err)
		}
		if start := p.LogStartOffset(); start == 0 {
			t.Fatalf("positions topic log start %d; want it moved up by the snapshots' trims", start)
		}
		got := readAll(t, ctx, "t", 2, opts...)
		if n := len(got[0]) + len(got[1]); n != len(want) {
			t.Fatalf("destination has %d records; want %d", n, len(want))
		}
	})
}
