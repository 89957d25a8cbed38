package engine

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A data dir killed with every partition written is recovered by the
// parallel open, each partition with all it held, and an open longer
// than the open's progress interval logs how far it got and what it opened.
func TestOpenRecoversPartitionsInParallelAndLogsProgress(t *testing.T) {
	t.Parallel()
	const parts = 40
	dir := t.TempDir()
	e, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.CreateTopic("t", parts); err != nil {
		t.Fatal(err)
	}
	for i := range parts {
		p, err := e.Partition("t", i)
		if err != nil {
			t.Fatal(err)
		}
		for range i + 1 {
			if _, err := p.Append(plainRecordBatch(t, "v")); err != nil {
				t.Fatal(err)
			}
		}
	}
	e.kill()

	var logged lockedBuffer
	opts := Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))}
	opts.private.openProgressEvery = time.Nanosecond
	e, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for i := range parts {
		p, err := e.Partition("t", i)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.log.HighWatermark(); got != int64(i+1) {
			t.Errorf("partition %d recovered with %d records, want %d", i, got, i+1)
		}
	}
	if out := logged.String(); !strings.Contains(out, `msg="opened partitions"`) || !strings.Contains(out, "partitions=40") {
		t.Fatalf("no line for the long open; logged:\n%s", out)
	}
}
