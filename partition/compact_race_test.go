package partition

import (
	"bytes"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/segment"
)

// A reader holding a chunk of a segment that a cleaning replaces keeps
// reading the old bytes until it releases them.
func TestCleanReaderKeepsReplacedSegment(t *testing.T) {
	c := newCompactLog(t)
	c.run("k0 k1 k0 k1 | k0 k1 | k9")
	ch, err := c.l.Read(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	before := append([]byte(nil), ch.Data...)
	c.clean(CleanConfig{})
	c.wantRecords("4:0 5:1 6:9")
	if !bytes.Equal(ch.Data, before) {
		t.Fatal("a chunk of the replaced segment changed under its reader")
	}
	ch.Release()
}

// Appends, reads from the log start, retention and cleaning passes run
// together (run with -race): every read sees offsets increasing, and at
// the end the newest value of every key is the last one appended.
func TestCleanConcurrentAppendsAndReads(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Options{NoRecycle: true, Logger: slog.New(slog.DiscardHandler),
		Segment: segment.Options{MaxBytes: 16 << 10, IndexIntervalBytes: 512}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const keys = 50
	n := 3000
	if testing.Short() {
		n = 500
	}
	var last [keys]atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	wg.Add(1)
	go func() { // the cleaner
		defer wg.Done()
		for !stop.Load() {
			if _, err := l.Clean(CleanConfig{DeleteRetention: time.Hour, MaxKeys: 20}); err != nil {
				errs <- err
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	wg.Add(1)
	go func() { // a reader from the start, again and again
		defer wg.Done()
		for !stop.Load() {
			prev := int64(-1)
			for off := l.FirstRetainedOffset(); off < l.HighWatermark(); {
				ch, err := l.ReadRetained(off, 4096)
				if err != nil {
					errs <- err
					return
				}
				bi := batch.NewIter(ch.Data)
				for bi.Next() {
					b := bi.Batch()
					if b.BaseOffset() <= prev {
						errs <- fmt.Errorf("batch at %d after %d", b.BaseOffset(), prev)
					}
					prev = b.LastOffset()
				}
				if err := bi.Err(); err != nil {
					errs <- err
				}
				off = ch.NextOffset
				ch.Release()
			}
		}
	}()
	bl := batch.NewBuilder(batch.CodecNone)
	for i := range n {
		k := i % keys
		bl.Reset(batch.CodecNone)
		bl.Append(0, fmt.Appendf(nil, "key-%d", k), bytes.Repeat([]byte{byte(i)}, 100), nil)
		v, err := bl.Build()
		if err != nil {
			t.Fatal(err)
		}
		res, err := l.Append(v)
		if err != nil {
			t.Fatal(err)
		}
		last[k].Store(res.BaseOffset)
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// A final pass over everything written.
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	err = l.roll(l.leo)
	l.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	l.waitIdle()
	for {
		st, err := l.Clean(CleanConfig{DeleteRetention: time.Hour, MaxKeys: 20})
		if err != nil {
			t.Fatal(err)
		}
		if st.EndOffset >= l.HighWatermark() {
			break
		}
	}
	seen := map[string]int64{}
	var dec batch.Decoder
	count := 0
	for off := l.FirstRetainedOffset(); off < l.HighWatermark(); {
		ch, err := l.ReadRetained(off, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		bi := batch.NewIter(ch.Data)
		for bi.Next() {
			it, err := dec.Records(bi.Batch())
			if err != nil {
				t.Fatal(err)
			}
			var r batch.Record
			for it.Next(&r) {
				seen[string(r.Key)] = r.Offset
				count++
			}
		}
		if err := bi.Err(); err != nil {
			t.Fatal(err)
		}
		off = ch.NextOffset
		ch.Release()
	}
	for k := range keys {
		if got, want := seen[fmt.Sprintf("key-%d", k)], last[k].Load(); got != want {
			t.Fatalf("key-%d's newest record at %d, want %d", k, got, want)
		}
	}
	if count != keys {
		t.Fatalf("%d records left, want one per key (%d)", count, keys)
	}
}
