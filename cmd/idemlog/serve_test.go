package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestServeFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve"}, "--dir is required"},
		{[]string{"serve", "--dir", "x", "--fsync", "sometimes"}, "cannot parse"},
		{[]string{"serve", "--dir", "x", "--log-level", "loud"}, "level"},
		{[]string{"serve", "--dir", "x", "extra"}, "unexpected argument"},
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
	for _, args := range [][]string{
		{"--max-connections", "-2"},
		{"--max-connections-per-ip", "-1"},
		{"--connections-max-idle-ms", "0"},
		{"--socket-request-max-bytes", "10"},
		{"--request-timeout-ms", "0"},
		{"--max-producers-per-partition", "0"},
		{"--producer-id-expiration-ms", "0"},
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

func isTimeoutErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
