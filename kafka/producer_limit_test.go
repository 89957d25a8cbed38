package kafka

import (
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/idemlog/idemlog/engine"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// logLines collects a server's log lines, for tests that check what the
// operator is told.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}

// matching returns the lines that contain every one of parts.
func (l *logLines) matching(parts ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
next:
	for _, line := range l.lines {
		for _, p := range parts {
			if !strings.Contains(line, p) {
				continue next
			}
		}
		out = append(out, line)
	}
	return out
}

// startServerEngine serves an engine opened in dir with engOpts, logging
// at INFO and above (what `idemlog serve` shows by default) to the
// returned lines.
func startServerEngine(t *testing.T, dir string, engOpts engine.Options, opts Options) (*testServer, *logLines) {
	t.Helper()
	e, err := engine.Open(dir, engOpts)
	if err != nil {
		t.Fatal(err)
	}
	logs := &logLines{}
	opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	srv, err := New(e, opts)
	if err != nil {
		e.Close()
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		e.Close()
	})
	return &testServer{eng: e, srv: srv, addr: ln.Addr().String(), dir: dir}, logs
}

// A partition at MaxProducersPerPartition refuses a new idempotent
// producer with THROTTLING_QUOTA_EXCEEDED (retriable: the refusal ends as
// producers expire) and a message naming the limit and the expiry, logs
// that once at WARN however often it refuses, and keeps serving the
// producers it has.
func TestProducerLimitAnswersThrottlingWithMessage(t *testing.T) {
	const limit = 3
	ts, logs := startServerEngine(t, t.TempDir(), engine.Options{MaxProducersPerPartition: limit}, Options{})
	if err := ts.eng.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	rc := dial(t, ts.addr)
	produce := func(pid int64, seq int32) kmsg.ProduceResponseTopicPartition {
		resp := rc.roundTrip(produceReq("t", map[int32][]byte{0: buildBatch(t, pid, 0, seq, 1)})).(*kmsg.ProduceResponse)
		return resp.Topics[0].Partitions[0]
	}
	var pids []int64
	for range limit + 1 {
		ip := rc.roundTrip(kmsg.NewPtrInitProducerIDRequest()).(*kmsg.InitProducerIDResponse)
		if ip.ErrorCode != 0 {
			t.Fatalf("InitProducerId: error %d", ip.ErrorCode)
		}
		pids = append(pids, ip.ProducerID)
	}
	for _, pid := range pids[:limit] {
		if p := produce(pid, 0); p.ErrorCode != 0 {
			t.Fatalf("producer %d: error %d", pid, p.ErrorCode)
		}
	}
	for range 5 {
		p := produce(pids[limit], 0)
		if p.ErrorCode != kerr.ThrottlingQuotaExceeded.Code {
			t.Fatalf("producer %d past the limit: error %d (%v), want THROTTLING_QUOTA_EXCEEDED",
				pids[limit], p.ErrorCode, kerr.ErrorForCode(p.ErrorCode))
		}
		if p.ErrorMessage == nil || !strings.Contains(*p.ErrorMessage, "3 producers") ||
			!strings.Contains(*p.ErrorMessage, "MaxProducersPerPartition") || !strings.Contains(*p.ErrorMessage, "24h0m0s") {
			t.Fatalf("error message %v: want the limit (3 producers, MaxProducersPerPartition) and the expiry (24h0m0s)", p.ErrorMessage)
		}
	}
	if got := logs.matching("level=WARN", "refuses new producers", "t-0"); len(got) != 1 {
		t.Fatalf("%d WARN lines about the refused producer, want 1 (rate-limited): %q", len(got), got)
	}
	if p := produce(pids[0], 1); p.ErrorCode != 0 {
		t.Fatalf("a producer the partition holds: error %d after the limit refused another", p.ErrorCode)
	}
}
