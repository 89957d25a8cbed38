package main

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	for _, p := range []string{"auto-0", "auto-1"} {
		if _, err := os.Stat(filepath.Join(dir, p, ".kafka_cleanshutdown")); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}
