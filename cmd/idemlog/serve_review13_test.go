package main

import (
	"bufio"
	"bytes"
	"os/exec"
	"sync"
	"syscall"

	"context"
	"github.com/idemlog/idemlog/engine"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// busyAddr returns an address some listener of the test holds.
func review13BusyAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

// TestReview13BadAdvertiseIsUsageError: a malformed --advertise is a
// command-line mistake: exit 2 with the usage, and nothing created in --dir.
func TestReview13BadAdvertiseIsUsageError(t *testing.T) {
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

// TestReview13BadPartitionsIsUsageError: --partitions 0 or -1 is not a
// partition count; it must not be turned silently into 1. (The busy
// --listen makes the current code return instead of serving.)
func TestReview13BadPartitionsIsUsageError(t *testing.T) {
	busy := review13BusyAddr(t)
	for _, n := range []string{"0", "-1"} {
		dir := filepath.Join(t.TempDir(), "data")
		code, _, stderr := runCLI("serve", "--dir", dir, "--listen", busy, "--partitions", n)
		if code != exitUsage || !strings.Contains(stderr, "partitions") {
			t.Errorf("--partitions %s: exit %d, want %d with a message about --partitions (stderr %q)", n, code, exitUsage, stderr)
		}
	}
}

// TestReview13PortInUseLeavesNoState: a serve that cannot listen fails
// (non-zero, on stderr) and leaves no data dir behind: it must not create
// the dir, its lock file and the transaction-state topic first.
func TestReview13PortInUseLeavesNoState(t *testing.T) {
	busy := review13BusyAddr(t)
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

// TestReview13MetricsPortInUseNotAnnounced: when --metrics cannot listen,
// serve fails, and must not have told stdout "listening on" first (the
// first line scripts such as scripts/kafka-suite wait for to know the
// server is up).
func TestReview13MetricsPortInUseNotAnnounced(t *testing.T) {
	busy := review13BusyAddr(t)
	dir := filepath.Join(t.TempDir(), "data")
	code, stdout, stderr := runCLI("serve", "--dir", dir, "--listen", "127.0.0.1:0", "--metrics", busy)
	if code == exitOK || !strings.Contains(stderr, "metrics") {
		t.Fatalf("exit %d, stderr %q: want a failure about metrics", code, stderr)
	}
	if strings.Contains(stdout, "listening on") {
		t.Errorf("serve failed at startup but stdout announced %q", strings.TrimSpace(stdout))
	}
}

// TestReview13AdvertisePortKept: --advertise with an empty host (":PORT")
// is accepted, so its port must be what Metadata advertises; it is
// silently replaced by the listening address.
func TestReview13AdvertisePortKept(t *testing.T) {
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

// TestReview13Child is not a test: run as a child process (by the tests
// below) it runs the command line in IDEMLOG_REVIEW13_ARGS and exits.
func TestReview13Child(t *testing.T) {
	args := os.Getenv("IDEMLOG_REVIEW13_ARGS")
	if args == "" {
		return
	}
	os.Exit(run(strings.Split(args, "\x1f"), os.Stdout, os.Stderr))
}

func review13StartChild(t *testing.T, args ...string) (*exec.Cmd, string, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestReview13Child$")
	cmd.Env = append(os.Environ(), "IDEMLOG_REVIEW13_ARGS="+strings.Join(args, "\x1f"))
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

// TestReview13SigtermDuringProduceKeepsAcked: SIGTERM while a producer
// is producing: exit 0, clean-shutdown markers, and every acknowledged
// record in the log after reopening.
func TestReview13SigtermDuringProduceKeepsAcked(t *testing.T) {
	dir := t.TempDir()
	cmd, addr, stderr := review13StartChild(t, "serve", "--dir", dir, "--listen", "127.0.0.1:0", "--log-level", "warn")
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
	t.Logf("acked %d, max offset %d, hw %d", acked, maxOff, p.Log().HighWatermark())
	if hw := p.Log().HighWatermark(); hw <= maxOff || hw < acked {
		t.Errorf("after SIGTERM: high watermark %d, but offset %d (%d records) acknowledged", hw, maxOff, acked)
	}
}
