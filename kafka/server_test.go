package kafka

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/kafka/group"
	"github.com/idemlog/idemlog/partition"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// testWriter sends log lines to the test's log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}

// testServer is an engine in a temp dir served on 127.0.0.1:0.
type testServer struct {
	eng  *engine.Engine
	srv  *Server
	addr string
	dir  string
}

func startServer(t testing.TB, opts Options) *testServer {
	t.Helper()
	dir := t.TempDir()
	return startServerDir(t, dir, opts)
}

func startServerDir(t testing.TB, dir string, opts Options) *testServer {
	t.Helper()
	e, err := engine.Open(dir, engine.Options{Partition: partition.Options{}})
	if err != nil {
		t.Fatal(err)
	}
	if opts.Group.MinSessionTimeout == 0 {
		opts.Group = group.Options{MinSessionTimeout: 100 * time.Millisecond, MaxSessionTimeout: time.Minute}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	srv, err := New(e, opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	ts := &testServer{eng: e, srv: srv, addr: ln.Addr().String(), dir: dir}
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		e.Close()
	})
	return ts
}

func (ts *testServer) client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(ts.addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// consume reads every record of topic from the start up to n records.
func consume(t testing.TB, ts *testServer, topic string, n int, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	cl := ts.client(t, append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	ctx := ctxT(t)
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", len(out), n, err)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", tp, p, err) })
		out = append(out, fs.Records()...)
	}
	return out
}

func TestProduceConsumeIdempotent(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 2); err != nil {
		t.Fatal(err)
	}
	cl := ts.client(t, kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := ctxT(t)
	const n = 200
	for i := range n {
		r := &kgo.Record{Value: []byte(strconv.Itoa(i)), Partition: int32(i % 2)}
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got := consume(t, ts, "t", n)
	if len(got) != n {
		t.Fatalf("consumed %d records, want %d", len(got), n)
	}
	seen := map[string]bool{}
	next := map[int32]int64{}
	for _, r := range got {
		if seen[string(r.Value)] {
			t.Fatalf("duplicate %s", r.Value)
		}
		seen[string(r.Value)] = true
		if r.Offset != next[r.Partition] {
			t.Fatalf("partition %d: offset %d, want %d", r.Partition, r.Offset, next[r.Partition])
		}
		next[r.Partition]++
	}
	for p := range 2 {
		part, _ := ts.eng.Partition("t", p)
		if part.Producers() != 1 {
			t.Errorf("partition %d: %d producers, want 1 (idempotent)", p, part.Producers())
		}
	}
}

// rawConn speaks the protocol by hand, for the framing tests and exact
// retries.
type rawConn struct {
	t    testing.TB
	c    net.Conn
	corr int32
}

func dial(t testing.TB, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second))
	return &rawConn{t: t, c: c}
}

func (rc *rawConn) send(req kmsg.Request) int32 {
	rc.corr++
	var frame []byte
	frame = append(frame, 0, 0, 0, 0)
	frame = binary.BigEndian.AppendUint16(frame, uint16(req.Key()))
	frame = binary.BigEndian.AppendUint16(frame, uint16(req.GetVersion()))
	frame = binary.BigEndian.AppendUint32(frame, uint32(rc.corr))
	frame = binary.BigEndian.AppendUint16(frame, 4)
	frame = append(frame, "test"...)
	if req.IsFlexible() {
		frame = append(frame, 0)
	}
	frame = req.AppendTo(frame)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	if _, err := rc.c.Write(frame); err != nil {
		rc.t.Fatal(err)
	}
	return rc.corr
}

func (rc *rawConn) recv(resp kmsg.Response) {
	rc.t.Helper()
	var size [4]byte
	if _, err := io.ReadFull(rc.c, size[:]); err != nil {
		rc.t.Fatalf("read response: %v", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(rc.c, body); err != nil {
		rc.t.Fatal(err)
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != rc.corr {
		rc.t.Fatalf("correlation %d, want %d", got, rc.corr)
	}
	body = body[4:]
	if resp.IsFlexible() && resp.Key() != kmsg.ApiVersions.Int16() {
		body = body[1:] // empty header tags
	}
	if err := resp.ReadFrom(body); err != nil {
		rc.t.Fatalf("decode %T: %v", resp, err)
	}
}

func (rc *rawConn) roundTrip(req kmsg.Request) kmsg.Response {
	rc.t.Helper()
	rc.send(req)
	resp := req.ResponseKind()
	rc.recv(resp)
	return resp
}

// expectClosed asserts the server closed the connection.
func (rc *rawConn) expectClosed() {
	rc.t.Helper()
	rc.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var b [1]byte
	// A read timeout means the server left the connection open.
	if n, err := rc.c.Read(b[:]); err == nil || n > 0 || isTimeout(err) {
		rc.t.Fatalf("connection still open (read %d bytes, %v)", n, err)
	}
}

func createTopic(t testing.TB, cl *kgo.Client, topic string, parts int) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, int32(parts), 1
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 5000
	resp, err := req.RequestWith(ctxT(t), cl)
	if err != nil {
		return err
	}
	return kerr.ErrorForCode(resp.Topics[0].ErrorCode)
}

// TestTopicsAdmin: create (and its errors), metadata with ids, delete.
func TestTopicsAdmin(t *testing.T) {
	ts := startServer(t, Options{})
	cl := ts.client(t)
	if err := createTopic(t, cl, "a", 3); err != nil {
		t.Fatal(err)
	}
	if err := createTopic(t, cl, "a", 3); err != kerr.TopicAlreadyExists {
		t.Fatalf("again: %v", err)
	}
	if err := createTopic(t, cl, "../x", 1); err != kerr.InvalidTopicException {
		t.Fatalf("bad name: %v", err)
	}
	if err := createTopic(t, cl, "b", 0); err != kerr.InvalidPartitions {
		t.Fatalf("0 partitions: %v", err)
	}
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	name := "a"
	rt.Topic = &name
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxT(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 3 || resp.Topics[0].TopicID == [16]byte{} {
		t.Fatalf("metadata: %+v", resp.Topics)
	}
	id := resp.Topics[0].TopicID
	del := kmsg.NewPtrDeleteTopicsRequest()
	for _, name := range []string{"a", "missing"} {
		dt := kmsg.NewDeleteTopicsRequestTopic()
		dt.Topic = &name
		del.Topics = append(del.Topics, dt)
	}
	dresp, err := del.RequestWith(ctxT(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if dresp.Topics[0].ErrorCode != 0 || dresp.Topics[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("delete: %+v", dresp.Topics)
	}
	if _, ok := ts.eng.Frontend().TopicByID(id); ok {
		t.Fatal("deleted topic's id still resolves")
	}
	if err := createTopic(t, cl, "a", 1); err != nil {
		t.Fatalf("recreate: %v", err)
	}
}

// TestRetentionTick: the server's maintenance applies topic retention.
func TestRetentionTick(t *testing.T) {
	ts := startServer(t, Options{MaintainInterval: 20 * time.Millisecond, RetentionInterval: 20 * time.Millisecond})
	if err := ts.eng.CreateTopic("r", 1, map[string]string{"retention.bytes": "1", "segment.bytes": "4096"}); err != nil {
		t.Fatal(err)
	}
	p, _ := ts.eng.Partition("r", 0)
	for i := range 100 {
		if _, err := p.Append(buildBatch(t, -1, 0, 0, 10)); err != nil {
			t.Fatal(i, err)
		}
	}
	if ents, _ := os.ReadDir(ts.eng.Frontend().Log(p).Dir()); len(ents) < 6 {
		t.Fatalf("no roll: %d files", len(ents))
	}
	deadline := time.Now().Add(10 * time.Second)
	for p.LogStartOffset() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("retention never deleted a segment")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCloseWithStuckClient: a client that sends fetches and never reads the
// answers cannot keep Close from returning.
func TestCloseWithStuckClient(t *testing.T) {
	e, err := engine.Open(t.TempDir(), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	p, _ := e.Partition("t", 0)
	big := benchRecords(t, 15, 64<<10) // ~1 MiB batches: the answers fill socket buffers quickly
	for range 16 {
		if _, err := p.Append(big); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := New(e, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	rc := dial(t, ln.Addr().String())
	for range 16 {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.MaxBytes = 11, 64<<20
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = "t"
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes = 64 << 20
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		rc.send(req) // and never read
	}
	time.Sleep(200 * time.Millisecond)
	done := make(chan struct{})
	go func() { srv.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(closeWriteGrace + 10*time.Second):
		t.Fatal("Close hung on a client that does not read")
	}
}

func quietServer(t *testing.T, opts Options) *testServer {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return startServer(t, opts)
}

func TestNoGoroutineLeak(t *testing.T) {
	ts := quietServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	// warm up
	rc := dial(t, ts.addr)
	rc.roundTrip(kmsg.NewPtrMetadataRequest())
	rc.c.Close()
	time.Sleep(200 * time.Millisecond)
	base := runtime.NumGoroutine()
	for range 50 {
		c, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		rc := &rawConn{t: t, c: c}
		for range 20 {
			m := kmsg.NewPtrMetadataRequest()
			m.Version = 9
			rc.send(m)
		}
		f := kmsg.NewPtrFetchRequest()
		f.Version, f.MaxWaitMillis, f.MinBytes, f.MaxBytes = 11, 500, 1, 1<<20
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = "t"
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes = 1 << 20
		ft.Partitions = append(ft.Partitions, fp)
		f.Topics = append(f.Topics, ft)
		rc.send(f)
		c.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base+2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base+2 {
		buf := make([]byte, 1<<20)
		t.Errorf("goroutines %d, was %d\n%s", n, base, buf[:runtime.Stack(buf, true)])
	}
}

// TestClientHostIPv6: Kafka writes a member's client host as
// InetAddress.toString of the connection's peer, "/" + getHostAddress();
// Java's Inet6Address.getHostAddress never compresses zeros
// ("0:0:0:0:0:0:0:1"), unlike Go's net.IP.String ("::1").
func TestClientHostIPv6(t *testing.T) {
	for _, c := range []struct {
		ip   string
		want string
	}{
		{"::1", "/0:0:0:0:0:0:0:1"},
		{"2001:db8::1", "/2001:db8:0:0:0:0:0:1"},
		{"127.0.0.1", "/127.0.0.1"},
	} {
		if got := clientHost(&net.TCPAddr{IP: net.ParseIP(c.ip), Port: 5000}); got != c.want {
			t.Errorf("clientHost(%s) = %q, want %q as Kafka writes it", c.ip, got, c.want)
		}
	}
}
