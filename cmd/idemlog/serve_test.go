package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idemlog/idemlog/engine"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestServeFlags(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve"}, "--dir is required"},
		{[]string{"serve", "--dir", "x", "--fsync", "sometimes"}, "cannot parse"},
		{[]string{"serve", "--dir", "x", "--log-level", "loud"}, "level"},
		{[]string{"serve", "--dir", "x", "extra"}, "unexpected argument"},
		{[]string{"serve", "--dir", "x", "--pprof"}, "--pprof needs --metrics"},
	} {
		var out, errb strings.Builder
		if code := run(c.args, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, errb.String(), c.want)
		}
	}
}

// TestServe: the command serves Kafka clients and metrics, and stops
// cleanly (clean-shutdown markers) when its context ends.
func TestServe(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, serveConfig{listen: "127.0.0.1:0", dir: dir, metrics: "127.0.0.1:0", autoCreate: true, partitions: 2},
			pw, slog.New(slog.DiscardHandler))
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	var addr, metrics string
	for (addr == "" || metrics == "") && sc.Scan() {
		if a, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
			addr = a
		}
		if a, ok := strings.CutPrefix(sc.Text(), "metrics on "); ok {
			metrics = a
		}
	}
	go io.Copy(io.Discard, pr)
	if addr == "" || metrics == "" {
		t.Fatalf("no addresses printed; serve: %v", <-done)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("auto"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer pcancel()
	if err := cl.ProduceSync(pctx, &kgo.Record{Value: []byte("hello")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	resp, err := http.Get("http://" + metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"idemlog_kafka_requests_total{api=\"Produce\"}", "idemlog_producers", "go_goroutines"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Every partition that holds segments was closed cleanly; one never
	// written has none and nothing to recover (it opens dormant).
	for _, p := range []string{"auto-0", "auto-1"} {
		logs, _ := filepath.Glob(filepath.Join(dir, p, "*.log"))
		if _, err := os.Stat(filepath.Join(dir, p, ".kafka_cleanshutdown")); err != nil && len(logs) > 0 {
			t.Errorf("%s: %v", p, err)
		}
	}
}

// Out-of-range limit flags are usage errors, refused before anything is
// opened.
func TestServeLimitFlagsChecked(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--max-connections", "-2"},
		{"--max-connections-per-ip", "-1"},
		{"--connections-max-idle-ms", "0"},
		{"--socket-request-max-bytes", "10"},
		{"--request-timeout-ms", "0"},
		{"--max-producers-per-partition", "0"},
		{"--producer-id-expiration-ms", "0"},
		{"--group-min-session-timeout-ms", "0"},
		{"--group-max-session-timeout-ms", "5000"}, // under the min, 6000
	} {
		dir := filepath.Join(t.TempDir(), "data")
		var out, errb strings.Builder
		if code := run(append([]string{"serve", "--dir", dir}, args...), &out, &errb); code != exitUsage || !strings.Contains(errb.String(), args[0]) {
			t.Errorf("%v: exit %d, stderr %q; want a usage error naming %s", args, code, errb.String(), args[0])
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%v: the data dir exists after a usage error (%v)", args, err)
		}
	}
}

// The limits set on serve reach the server and the engine: with
// --max-producers-per-partition 1 a second idempotent producer is refused
// with THROTTLING_QUOTA_EXCEEDED, and with --max-connections-per-ip 8 one
// of a client's 9 connections is closed.
func TestServeLimitsApplied(t *testing.T) {
	t.Parallel()
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, serveConfig{listen: "127.0.0.1:0", dir: t.TempDir(), autoCreate: true, partitions: 1,
			maxProducers: 1, maxConnsPerIP: 8}, pw, slog.New(slog.DiscardHandler))
		pw.Close()
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	sc := bufio.NewScanner(pr)
	var addr string
	for addr == "" && sc.Scan() {
		addr, _ = strings.CutPrefix(sc.Text(), "listening on ")
	}
	go io.Copy(io.Discard, pr)
	if addr == "" {
		t.Fatal("no address printed")
	}
	pctx, pcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer pcancel()
	produce := func(opts ...kgo.Opt) error {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("t"), kgo.AllowAutoTopicCreation()}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		return cl.ProduceSync(pctx, &kgo.Record{Value: []byte("v")}).FirstErr()
	}
	if err := produce(); err != nil {
		t.Fatalf("first producer: %v", err)
	}
	if err := produce(kgo.RecordRetries(2), kgo.MetadataMinAge(10*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 10 * time.Millisecond })); !errors.Is(err, kerr.ThrottlingQuotaExceeded) {
		t.Fatalf("second producer with --max-producers-per-partition 1: %v, want THROTTLING_QUOTA_EXCEEDED", err)
	}
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range 9 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	closed := 0
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		var b [1]byte
		if n, err := c.Read(b[:]); n == 0 && err != nil && !isTimeoutErr(err) {
			closed++
		}
	}
	if closed == 0 {
		t.Fatal("9 connections from one address with --max-connections-per-ip 8: none closed")
	}
}

// --group-max-session-timeout-ms reaches the group coordinator: a
// JoinGroup asking for a longer session is refused with
// INVALID_SESSION_TIMEOUT, one within it passes that check (and is asked
// for its member id, KIP-394: the client sends the newest version).
func TestServeGroupSessionBound(t *testing.T) {
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, serveConfig{listen: "127.0.0.1:0", dir: t.TempDir(), partitions: 1,
			groupMinSession: time.Second, groupMaxSession: 10 * time.Second}, pw, slog.New(slog.DiscardHandler))
		pw.Close()
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	sc := bufio.NewScanner(pr)
	var addr string
	for addr == "" && sc.Scan() {
		addr, _ = strings.CutPrefix(sc.Text(), "listening on ")
	}
	go io.Copy(io.Discard, pr)
	if addr == "" {
		t.Fatal("no address printed")
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rctx, rcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer rcancel()
	for _, c := range []struct {
		sessionMs int32
		want      int16
	}{{20000, kerr.InvalidSessionTimeout.Code}, {500, kerr.InvalidSessionTimeout.Code}, {5000, kerr.MemberIDRequired.Code}} {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Version, req.Group, req.ProtocolType = 3, "g", "consumer"
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = c.sessionMs, c.sessionMs
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = "range", []byte{0, 1}
		req.Protocols = append(req.Protocols, p)
		resp, err := req.RequestWith(rctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != c.want {
			t.Errorf("JoinGroup with a %d ms session under --group-min/max-session-timeout-ms 1000/10000: code %d, want %d", c.sessionMs, resp.ErrorCode, c.want)
		}
	}
}

func isTimeoutErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// busyAddr returns an address some listener of the test holds.
func busyListenAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

// TestServePprof: --pprof serves the runtime's goroutine profile beside
// /metrics; without it the profiles are not exposed.
func TestServePprof(t *testing.T) {
	for _, on := range []bool{false, true} {
		dir := t.TempDir()
		pr, pw := io.Pipe()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- serve(ctx, serveConfig{listen: "127.0.0.1:0", dir: dir, metrics: "127.0.0.1:0", pprof: on, partitions: 1},
				pw, slog.New(slog.DiscardHandler))
			pw.Close()
		}()
		sc := bufio.NewScanner(pr)
		var metrics string
		for metrics == "" && sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "metrics on "); ok {
				metrics = a
			}
		}
		go io.Copy(io.Discard, pr)
		if metrics == "" {
			cancel()
			t.Fatalf("no metrics address printed; serve: %v", <-done)
		}
		resp, err := http.Get("http://" + metrics + "/debug/pprof/goroutine?debug=1")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		served := resp.StatusCode == http.StatusOK && strings.Contains(string(body), "goroutine profile:")
		if served != on {
			t.Errorf("pprof %v: status %d, goroutine profile served: %v", on, resp.StatusCode, served)
		}
	}
}

// TestBadAdvertiseIsUsageError: a malformed --advertise is a
// command-line mistake: exit 2 with the usage, and nothing created in --dir.
func TestBadAdvertiseIsUsageError(t *testing.T) {
	t.Parallel()
	for _, adv := range []string{"no-port", "host:99999"} {
		dir := filepath.Join(t.TempDir(), "data")
		code, _, stderr := runCLI("serve", "--dir", dir, "--listen", "127.0.0.1:0", "--advertise", adv)
		if code != exitUsage {
			t.Errorf("--advertise %q: exit %d, want %d (stderr %q)", adv, code, exitUsage, stderr)
		}
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("--advertise %q: data dir %s created by a command that failed on its flags", adv, dir)
		}
	}
}

// TestBadPartitionsIsUsageError: --partitions 0 or -1 is not a
// partition count; it must not be turned silently into 1. (The busy
// --listen makes the current code return instead of serving.)
func TestBadPartitionsIsUsageError(t *testing.T) {
	t.Parallel()
	busy := busyListenAddr(t)
	for _, n := range []string{"0", "-1"} {
		dir := filepath.Join(t.TempDir(), "data")
		code, _, stderr := runCLI("serve", "--dir", dir, "--listen", busy, "--partitions", n)
		if code != exitUsage || !strings.Contains(stderr, "partitions") {
			t.Errorf("--partitions %s: exit %d, want %d with a message about --partitions (stderr %q)", n, code, exitUsage, stderr)
		}
	}
}

// TestPortInUseLeavesNoState: a serve that cannot listen fails
// (non-zero, on stderr) and leaves no data dir behind: it must not create
// the dir, its lock file and the transaction-state topic first.
func TestPortInUseLeavesNoState(t *testing.T) {
	t.Parallel()
	busy := busyListenAddr(t)
	dir := filepath.Join(t.TempDir(), "data")
	code, stdout, stderr := runCLI("serve", "--dir", dir, "--listen", busy)
	if code == exitOK || !strings.Contains(stderr, "cannot listen") {
		t.Fatalf("exit %d, stderr %q: want a failure about listening", code, stderr)
	}
	if strings.Contains(stdout, "listening on") {
		t.Errorf("stdout %q announces listening", stdout)
	}
	if ents, err := os.ReadDir(dir); err == nil {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("failed serve left data dir %s with %v", dir, names)
	}
}

// TestMetricsPortInUseNotAnnounced: when --metrics cannot listen,
// serve fails, and must not have told stdout "listening on" first (the
// first line scripts such as scripts/kafka-suite wait for to know the
// server is up).
func TestMetricsPortInUseNotAnnounced(t *testing.T) {
	t.Parallel()
	busy := busyListenAddr(t)
	dir := filepath.Join(t.TempDir(), "data")
	code, stdout, stderr := runCLI("serve", "--dir", dir, "--listen", "127.0.0.1:0", "--metrics", busy)
	if code == exitOK || !strings.Contains(stderr, "metrics") {
		t.Fatalf("exit %d, stderr %q: want a failure about metrics", code, stderr)
	}
	if strings.Contains(stdout, "listening on") {
		t.Errorf("serve failed at startup but stdout announced %q", strings.TrimSpace(stdout))
	}
}

// TestAdvertisePortKept: --advertise with an empty host (":PORT")
// is accepted, so its port must be what Metadata advertises; it is
// silently replaced by the listening address.
func TestAdvertisePortKept(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, serveConfig{listen: "127.0.0.1:0", dir: dir, advertise: ":19999", autoCreate: true, partitions: 1},
			pw, slog.New(slog.DiscardHandler))
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	var addr string
	for addr == "" && sc.Scan() {
		addr, _ = strings.CutPrefix(sc.Text(), "listening on ")
	}
	go io.Copy(io.Discard, pr)
	if addr == "" {
		cancel()
		t.Fatalf("not listening; serve: %v", <-done)
	}
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer rcancel()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(rctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Brokers) != 1 || resp.Brokers[0].Port != 19999 {
		t.Errorf("--advertise :19999: Metadata brokers %+v, want port 19999", resp.Brokers)
	}
}

// TestServeChildProcess is not a test: run as a child process (by the tests
// below) it runs the command line in IDEMLOG_SERVE_CHILD_ARGS and exits.
func TestServeChildProcess(t *testing.T) {
	args := os.Getenv("IDEMLOG_SERVE_CHILD_ARGS")
	if args == "" {
		return
	}
	os.Exit(run(strings.Split(args, "\x1f"), os.Stdout, os.Stderr))
}

func startServeChild(t *testing.T, args ...string) (*exec.Cmd, string, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestServeChildProcess$")
	cmd.Env = append(os.Environ(), "IDEMLOG_SERVE_CHILD_ARGS="+strings.Join(args, "\x1f"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(out)
	var addr string
	for addr == "" && sc.Scan() {
		addr, _ = strings.CutPrefix(sc.Text(), "listening on ")
	}
	go io.Copy(io.Discard, out)
	if addr == "" {
		cmd.Wait()
		t.Fatalf("child did not listen; stderr %s", stderr.String())
	}
	return cmd, addr, &stderr
}

// TestSigtermDuringProduceKeepsAcked: SIGTERM while a producer
// is producing: exit 0, clean-shutdown markers, and every acknowledged
// record in the log after reopening.
func TestSigtermDuringProduceKeepsAcked(t *testing.T) {
	dir := t.TempDir()
	cmd, addr, stderr := startServeChild(t, "serve", "--dir", dir, "--listen", "127.0.0.1:0", "--log-level", "warn")
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("t"), kgo.AllowAutoTopicCreation(),
		kgo.RecordRetries(1), kgo.RetryTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var mu sync.Mutex
	acked := int64(0)
	maxOff := int64(-1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("first")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	acked, maxOff = 1, 0
	stopProducing := make(chan struct{})
	producing := make(chan struct{})
	go func() {
		defer close(producing)
		for {
			select {
			case <-stopProducing:
				return
			default:
			}
			cl.Produce(ctx, &kgo.Record{Value: make([]byte, 512)}, func(r *kgo.Record, err error) {
				if err == nil {
					mu.Lock()
					acked++
					maxOff = max(maxOff, r.Offset)
					mu.Unlock()
				}
			})
		}
	}()
	time.Sleep(300 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	werr := cmd.Wait()
	t.Logf("serve exited %v after SIGTERM", time.Since(t0))
	close(stopProducing)
	cancel()
	<-producing
	cl.Close()
	if werr != nil {
		t.Fatalf("serve after SIGTERM: %v; stderr %s", werr, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "t-0", ".kafka_cleanshutdown")); err != nil {
		t.Error(err)
	}
	e, err := engine.Open(dir, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	p, err := e.Partition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("acked %d, max offset %d, hw %d", acked, maxOff, p.HighWatermark())
	if hw := p.HighWatermark(); hw <= maxOff || hw < acked {
		t.Errorf("after SIGTERM: high watermark %d, but offset %d (%d records) acknowledged", hw, maxOff, acked)
	}
}
