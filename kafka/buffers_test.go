package kafka

import (
	"bytes"
	"log/slog"
	"runtime"
	"testing"

	"github.com/idemlog/idemlog/batch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// heapInUse is the heap's live bytes after the garbage collector ran twice
// (a pooled buffer nobody took again is dropped at the second).
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// growth is how much the heap grew from before, per connection, in bytes.
func growth(before, after uint64, conns int) float64 {
	if after < before {
		return 0
	}
	return float64(after-before) / float64(conns)
}

// Connections that sent one request and went idle hold no buffers: 500 of
// them cost the server a few KiB each (the connection's state and its
// goroutines' bookkeeping; the bound leaves room for other tests'
// leftovers), not 128 KiB of read and write buffers allocated on accept.
func TestIdleConnectionsHoldNoBuffers(t *testing.T) {
	ts := startServer(t, Options{Logger: quietLogger()})
	const conns = 500
	before := heapInUse()
	var open []*rawConn
	for range conns {
		rc := dial(t, ts.addr)
		rc.roundTrip(kmsg.NewPtrApiVersionsRequest())
		open = append(open, rc)
	}
	after := heapInUse()
	per := growth(before, after, conns)
	t.Logf("%d idle connections: heap %d -> %d bytes, %.1f KiB per connection", conns, before, after, per/1024)
	if per > 32<<10 {
		t.Errorf("each idle connection holds %.1f KiB of heap, want under 32 KiB", per/1024)
	}
	runtime.KeepAlive(open)
}

// Connections that each produced 1 MB and went idle hold none of it: the
// frame, read-ahead and response buffers go back to a pool after each
// request, so 64 such connections cost the server little (the bound
// leaves room for other tests' leftovers), not 64 MiB (the 2,000
// held 3.4 GB).
func TestProducedConnectionsReleaseBuffers(t *testing.T) {
	ts := startServer(t, Options{Logger: quietLogger()})
	if err := ts.eng.CreateTopic("big", 1); err != nil {
		t.Fatal(err)
	}
	bld := batch.NewBuilder(batch.CodecNone)
	bld.Append(1700000000000, nil, bytes.Repeat([]byte("x"), 1_000_000), nil)
	b, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	recs := bytes.Clone(b)
	const conns = 64
	before := heapInUse()
	var open []*rawConn
	for range conns {
		rc := dial(t, ts.addr)
		req := produceReq("big", map[int32][]byte{0: recs})
		req.Acks = 1
		resp := rc.roundTrip(req).(*kmsg.ProduceResponse)
		if c := resp.Topics[0].Partitions[0].ErrorCode; c != 0 {
			t.Fatalf("produce error %d", c)
		}
		open = append(open, rc)
	}
	after := heapInUse()
	t.Logf("%d connections after a 1 MB produce each: heap %d -> %d bytes (%.1f KiB per connection)",
		conns, before, after, growth(before, after, conns)/1024)
	if after > before && after-before > 16<<20 {
		t.Errorf("%d idle connections that each produced 1 MB hold %d MiB of heap, want under 16 MiB in all",
			conns, (after-before)>>20)
	}
	runtime.KeepAlive(open)
}

// quietLogger discards the server's logs: a test's log lines are kept in
// memory, which would count as the connections' heap.
func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// A pooled buffer is always large enough: whatever capacities were given
// back (append grows buffers to sizes that are no power of two), getBuf(n)
// returns an empty buffer of capacity n or more.
func TestBufPoolCapacity(t *testing.T) {
	sizes := []int{0, 1, 4095, 4096, 4097, 65535, 65536, 65537, 1_000_000, 3 << 20, 100 << 20}
	for _, given := range sizes {
		putBuf(make([]byte, min(7, given), given))
	}
	for range 3 {
		for _, n := range sizes {
			b := getBuf(n)
			if len(b) != 0 || cap(b) < n {
				t.Fatalf("getBuf(%d): len %d cap %d", n, len(b), cap(b))
			}
			putBuf(append(b, 1))
		}
	}
	if b := getBuf(200 << 20); cap(b) < 200<<20 {
		t.Fatalf("getBuf above the largest class: cap %d", cap(b))
	}
}
