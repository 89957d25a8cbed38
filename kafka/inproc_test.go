package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/kafka/group"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// startInprocServer is a server with no listener at all: its clients reach
// it through Dial only.
func startInprocServer(t testing.TB, opts Options) (*engine.Engine, *Server) {
	t.Helper()
	e, err := engine.Open(t.TempDir(), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	opts.Group = group.Options{MinSessionTimeout: 100 * time.Millisecond, MaxSessionTimeout: time.Minute}
	srv, err := New(e, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Close()
		e.Close()
	})
	return e, srv
}

// TestDialServesKgoWithoutListener runs franz-go against a server that
// listens on no socket: transactions (one committed, one aborted), a
// consumer group (FindCoordinator's address goes back through the dialer)
// and read_committed fetches all travel through in-memory connections.
func TestDialServesKgoWithoutListener(t *testing.T) {
	e, srv := startInprocServer(t, Options{})
	if err := e.CreateTopic("t", 2); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	newClient := func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers("embedded"), kgo.Dialer(srv.Dial)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	p := newClient(kgo.TransactionalID("tx"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i, commit := range []bool{true, false, true} {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for part := range int32(2) {
			r := &kgo.Record{Topic: "t", Partition: part, Value: fmt.Appendf(nil, "%d-%d-%v", i, part, commit)}
			if err := p.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	c := newClient(kgo.ConsumerGroup("g"), kgo.ConsumeTopics("t"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[string]bool{}
	for len(got) < 4 {
		fs := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %v: %v", got, ctx.Err())
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", tp, p, err) })
		for _, r := range fs.Records() {
			if got[string(r.Value)] {
				t.Fatalf("record %s consumed twice", r.Value)
			}
			got[string(r.Value)] = true
		}
	}
	for _, v := range []string{"0-0-true", "0-1-true", "2-0-true", "2-1-true"} {
		if !got[v] {
			t.Fatalf("read_committed consumer got %v; missing %s", got, v)
		}
	}
	if err := c.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("group commit through the dialer: %v", err)
	}
	offs, err := e.Frontend().FetchOffsets("g", nil, false)
	if err != nil || len(offs) == 0 {
		t.Fatalf("group g's committed offsets = %v, %v; want some", offs, err)
	}
}

// TestDialBesideListenerKeepsAdvertisedAddress: a server that also serves
// TCP still tells TCP clients its listener's address; an in-process
// connection does not replace it.
func TestDialBesideListenerKeepsAdvertisedAddress(t *testing.T) {
	ts := startServer(t, Options{})
	conn, err := ts.srv.Dial(context.Background(), "tcp", "anything:1")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cl := ts.client(t)
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctxT(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Brokers) != 1 || net.JoinHostPort(resp.Brokers[0].Host, fmt.Sprint(resp.Brokers[0].Port)) != ts.addr {
		t.Fatalf("Metadata brokers %+v; want the listener %s", resp.Brokers, ts.addr)
	}
	in, err := kgo.NewClient(kgo.SeedBrokers(ts.addr), kgo.Dialer(ts.srv.Dial))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if err := in.Ping(ctxT(t)); err != nil {
		t.Fatalf("in-process client beside a listener: %v", err)
	}
}

// TestCloseEndsInprocConnections: Close must not wait for in-process
// clients to hang up (it waits for every connection's goroutines), and a
// Dial after Close fails.
func TestCloseEndsInprocConnections(t *testing.T) {
	_, srv := startInprocServer(t, Options{})
	conn, err := srv.Dial(context.Background(), "tcp", "")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	closed := make(chan struct{})
	go func() {
		srv.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close still waiting for an in-process connection")
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("client Read after server Close: %v; want io.EOF", err)
	}
	if _, err := srv.Dial(context.Background(), "tcp", ""); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Dial after Close: %v; want net.ErrClosed", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := srv.Dial(ctx, "tcp", ""); !errors.Is(err, context.Canceled) {
		t.Fatalf("Dial with a cancelled context: %v; want context.Canceled", err)
	}
}

// BenchmarkKgoTransport compares franz-go over Dial with franz-go over
// loopback TCP against one server, side by side: idempotent produce and
// read_committed consume of 1 KiB records, 1 and 4 partitions. Each
// consume iteration reads records produced before its timer starts.
//
//	go test -run '^$' -bench KgoTransport -benchtime 50000x ./kafka
func BenchmarkKgoTransport(b *testing.B) {
	ts := startServer(b, Options{Logger: slog.New(slog.DiscardHandler)})
	// Random bytes without compression: every record's KiB crosses the
	// transport (zeros would compress to almost nothing, and the
	// comparison would measure the codec).
	value := make([]byte, 1024)
	rng := rand.New(rand.NewPCG(1, 1))
	for i := range value {
		value[i] = byte(rng.Uint32())
	}
	for _, parts := range []int32{1, 4} {
		for _, transport := range []string{"inproc", "tcp"} {
			dial := []kgo.Opt{kgo.SeedBrokers(ts.addr)}
			if transport == "inproc" {
				dial = append(dial, kgo.Dialer(ts.srv.Dial))
			}
			newClient := func(opts ...kgo.Opt) *kgo.Client {
				cl, err := kgo.NewClient(append(opts, dial...)...)
				if err != nil {
					b.Fatal(err)
				}
				return cl
			}
			produce := func(b *testing.B, topic string, n int) {
				cl := newClient(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
					kgo.ProducerBatchCompression(kgo.NoCompression()))
				defer cl.Close()
				ctx := context.Background()
				for range n {
					cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
						if err != nil {
							b.Error(err)
						}
					})
				}
				if err := cl.Flush(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.Run(fmt.Sprintf("produce/partitions=%d/%s", parts, transport), func(b *testing.B) {
				topic := fmt.Sprintf("produce-%d-%s-%d", parts, transport, b.N)
				if err := ts.eng.CreateTopic(topic, int(parts)); err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(len(value)))
				cpu := startCPUClock()
				b.ResetTimer()
				produce(b, topic, b.N)
				b.StopTimer()
				cpu.report(b)
			})
			b.Run(fmt.Sprintf("consume/partitions=%d/%s", parts, transport), func(b *testing.B) {
				topic := fmt.Sprintf("consume-%d-%s-%d", parts, transport, b.N)
				if err := ts.eng.CreateTopic(topic, int(parts)); err != nil {
					b.Fatal(err)
				}
				produce(b, topic, b.N)
				cl := newClient(kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
					kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
				defer cl.Close()
				b.SetBytes(int64(len(value)))
				cpu := startCPUClock()
				b.ResetTimer()
				ctx := context.Background()
				for got := 0; got < b.N; {
					fs := cl.PollFetches(ctx)
					fs.EachError(func(tp string, p int32, err error) { b.Fatalf("fetch %s/%d: %v", tp, p, err) })
					got += fs.NumRecords()
				}
				b.StopTimer()
				cpu.report(b)
			})
		}
	}
}

// cpuClock measures the process's CPU time (user and system, client and
// server alike, as both run here), reported per record as cpu-ns/op: on
// a machine shared with other work, wall time says more about the
// neighbours than about the transport, CPU time much less so.
type cpuClock struct{ start time.Duration }

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func startCPUClock() cpuClock { return cpuClock{processCPU()} }

func (c cpuClock) report(b *testing.B) {
	b.ReportMetric(float64(processCPU()-c.start)/float64(b.N), "cpu-ns/op")
}

// TestInprocIdleConnectionClosed: the idle timeout works through the
// in-memory conn's read deadline as it does over TCP: a quiet in-process
// connection is closed, one that keeps sending requests is not. A conn
// whose deadlines did nothing would keep the quiet one open for ever.
func TestInprocIdleConnectionClosed(t *testing.T) {
	const idle = 200 * time.Millisecond
	_, srv := startInprocServer(t, Options{IdleTimeout: idle})
	dialRaw := func() *rawConn {
		c, err := srv.Dial(context.Background(), "tcp", "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(20 * time.Second))
		return &rawConn{t: t, c: c}
	}
	quiet, busy := dialRaw(), dialRaw()
	start := time.Now()
	for time.Since(start) < 3*idle {
		if resp := busy.roundTrip(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
			t.Fatalf("ApiVersions error %d", resp.ErrorCode)
		}
		time.Sleep(idle / 4)
	}
	quiet.expectClosed()
	busy.c.SetReadDeadline(time.Now().Add(idle / 4))
	var b [1]byte
	if n, err := busy.c.Read(b[:]); n > 0 || !isTimeout(err) {
		t.Fatalf("busy in-process connection: read %d bytes, %v; want it open (a read timeout)", n, err)
	}
	busy.expectClosed()
}
