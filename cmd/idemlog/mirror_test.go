package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/internal/testutil/enginetest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// fillDir creates topic with parts partitions in dir and commits n records
// per partition through an in-process Kafka client.
func fillDir(t *testing.T, dir, topic string, parts, n int) {
	t.Helper()
	enginetest.Serve(t, dir, func(e *engine.Engine, opts ...kgo.Opt) {
		if err := e.CreateTopic(topic, parts); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		cl, err := kgo.NewClient(append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for p := range parts {
			for i := range n {
				if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: int32(p), Value: fmt.Appendf(nil, "%d-%d", p, i)}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}

// TestMirrorJSONProgress runs the command between two data dirs with
// --stop-at-end: it exits 0 once caught up, and its last JSON line says
// done, with every record copied and no lag left.
func TestMirrorJSONProgress(t *testing.T) {
	t.Parallel()
	src, dst := t.TempDir(), t.TempDir()
	fillDir(t, src, "t", 2, 25)
	code, stdout, stderr := runCLI("mirror", "--from", src, "--to", dst, "--stop-at-end", "--json")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	var last progressLine
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil {
		t.Fatalf("last line %q: %v", lines[len(lines)-1], err)
	}
	if !last.Done || last.Records != 50 || last.Lag != 0 || len(last.Partitions) != 2 {
		t.Fatalf("last progress %+v; want done, 50 records, no lag, 2 partitions", last)
	}
	for _, p := range last.Partitions {
		if p.Topic != "t" || p.Position != 25 || p.End != 25 {
			t.Fatalf("partition progress %+v; want position and end 25", p)
		}
	}
}

// TestMirrorRefusedExitsOne: a destination topic with fewer partitions
// than its source, records in it, is refused with exit status 1 and a message that names
// the topic and both counts.
func TestMirrorRefusedExitsOne(t *testing.T) {
	t.Parallel()
	src, dst := t.TempDir(), t.TempDir()
	fillDir(t, src, "t", 3, 1)
	fillDir(t, dst, "t", 1, 1)
	code, _, stderr := runCLI("mirror", "--from", src, "--to", dst, "--stop-at-end")
	if code != exitFail || !strings.Contains(stderr, "destination refused") || !strings.Contains(stderr, "topic t") ||
		!strings.Contains(stderr, "1 partitions, the source 3") {
		t.Fatalf("exit %d, stderr %q; want 1 and a message on the partition counts", code, stderr)
	}
}

func TestMirrorUsageErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, args := range [][]string{
		{"mirror", "--to", dir},
		{"mirror", "--from", dir},
		{"mirror", "--from", dir, "--to", dir},
		{"mirror", "--from", dir, "--to", "127.0.0.1:9092", "--from-tls"},
		{"mirror", "--from", dir, "--to", "127.0.0.1:9092", "--to-sasl-mechanism", "GSSAPI"},
		{"mirror", "--from", dir, "--to", "127.0.0.1:9092", "--to-tls-ca", dir + "/missing.pem"},
		{"mirror", "--from", dir, "--to", "127.0.0.1:9092", "--to-tls-ca", dir},
		{"mirror", "--from", dir, "--to", "127.0.0.1:9092", "--to-sasl-user", "u"},
		{"mirror", "--from", dir, "--to", "127.0.0.1:9092", "--topics", "("},
		{"mirror", "--from", dir, "--to", "127.0.0.1:9092", "--commit-interval", "0s"},
	} {
		if code, _, stderr := runCLI(args...); code != exitUsage || !strings.Contains(stderr, "idemlog mirror:") {
			t.Errorf("%q: exit %d, stderr %q; want a usage error", args, code, stderr)
		}
	}
}

func TestBrokerList(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"127.0.0.1:9092", []string{"127.0.0.1:9092"}},
		{"a:1,b:2", []string{"a:1", "b:2"}},
		{"[::1]:9092", []string{"[::1]:9092"}},
		{"data", nil},
		{"/var/lib/idemlog", nil},
		{"./a:1", nil},
		{"a:notaport", nil},
		{"a:1,data", nil},
	} {
		got, ok := brokerList(c.in)
		if ok != (c.want != nil) || !slices.Equal(got, c.want) {
			t.Errorf("brokerList(%q) = %v, %v; want %v", c.in, got, ok, c.want)
		}
	}
}

// TestMirrorSecureEndpointOptions: TLS and SASL flags become client
// options of the cluster side they name, and only of it.
func TestMirrorSecureEndpointOptions(t *testing.T) {
	t.Parallel()
	f := endpointFlags{addr: "broker:9093", tls: true, saslMech: "scram-sha-512", saslUser: "u"}
	e, err := f.endpoint("to")
	if err != nil || len(e.Brokers) != 1 || len(e.Opts) != 2 {
		t.Fatalf("endpoint = %+v, %v; want one broker with a TLS and a SASL option", e, err)
	}
	plain := endpointFlags{addr: "broker:9092"}
	if e, err := plain.endpoint("from"); err != nil || len(e.Opts) != 0 {
		t.Fatalf("plain endpoint = %+v, %v; want no options", e, err)
	}
}
