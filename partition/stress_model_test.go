package partition

import (
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
)

// stressEntry is what the model knows of one appended batch.
type stressEntry struct {
	last int64
	sum  uint32
}

// stressModel is the reference the log is checked against: base offset
// -> (last offset, checksum of the batch without its base offset).
type stressModel struct {
	mu      sync.Mutex
	batches map[int64]stressEntry
}

func (m *stressModel) add(t *testing.T, base, last int64, sum uint32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.batches[base]; ok {
		t.Errorf("base offset %d assigned twice (last %d and %d)", base, old.last, last)
	}
	m.batches[base] = stressEntry{last, sum}
}

// stressSum is the checksum of a batch as stored or sent, less the
// base offset (stamped by the log).
func stressSum(b []byte) uint32 { return crc32.ChecksumIEEE(b[8:]) }

// stressObs is what readers saw: base offset -> (last offset, checksum),
// checked against the model once every append is acknowledged (a reader
// may see a batch before its Append returns).
type stressObs struct {
	mu   sync.Mutex
	seen map[int64]stressEntry
}

func (o *stressObs) add(t *testing.T, base, last int64, sum uint32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if old, ok := o.seen[base]; ok && old != (stressEntry{last, sum}) {
		t.Errorf("offset %d read back as two different batches (%d..%d crc %x, %d..%d crc %x)", base, base, old.last, old.sum, base, last, sum)
		return
	}
	o.seen[base] = stressEntry{last, sum}
}

// TestModelStress runs, under each sync policy, appenders
// (Append, and AppendBatch with a callback, waiting or not), readers
// (Read and ReadAppend of random offsets, around the log start and the high
// watermark), and a maintainer calling WaitDurable, Flush, ApplyRetention
// (small RetentionBytes, RetentionAge on a fake clock that moves),
// DeleteRecordsBefore and the offset getters, all at once, with tiny
// segments. Then Close, reopen, and read everything back.
//
// Checked: acknowledged offsets unique and contiguous; a read at o returns
// batches starting with the one that holds o, densely, below the high
// watermark read after it, each equal to what was appended there; a read
// fails with ErrOffsetOutOfRange only when o was below the log start read
// after it or above the high watermark read before it, and never succeeds
// for o below the start read before it or above the high watermark read
// after it; the high watermark and the log start never decrease, the start
// never passes the high watermark nor that the log end; under
// DurableVisibility no read returns an offset at or past the recovery
// point read after it (nor does the high watermark pass it); after Close
// and reopen, every offset from the final log start on reads back with the
// same payload, and the start and end are those at Close.
func TestModelStress(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		sync SyncPolicy
		dv   bool
	}{
		{"never", SyncPolicy{Kind: SyncNever}, false},
		{"always", SyncPolicy{Kind: SyncAlways}, false},
		{"always-dv", SyncPolicy{Kind: SyncAlways}, true},
		{"interval", SyncPolicy{Kind: SyncInterval, Interval: time.Millisecond}, false},
		{"bytes", SyncPolicy{Kind: SyncBytes, Bytes: 3000}, false},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stressRun(t, c.sync, c.dv, uint64(i)+uint64(time.Now().UnixNano()))
		})
	}
}

func stressRun(t *testing.T, sp SyncPolicy, dv bool, seed uint64) {
	t.Logf("seed %d", seed)
	var clock atomic.Int64
	clock.Store(1_700_000_000_000)
	opts := smallSegments(4 << 10)
	opts.Sync = sp
	opts.DurableVisibility = dv
	opts.RetentionBytes = 64 << 10
	opts.RetentionAge = 400 * time.Millisecond
	opts.RollAge = 150 * time.Millisecond
	opts.Now = func() time.Time { return time.UnixMilli(clock.Load()) }
	dir := t.TempDir()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	model := &stressModel{batches: map[int64]stressEntry{}}
	obs := &stressObs{seen: map[int64]stressEntry{}}

	const appenders, perAppender = 4, 250
	var wg, bg sync.WaitGroup
	var done atomic.Bool
	for w := range appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for i := range perAppender {
				n := 1 + rng.IntN(4)
				raw := makeBatch(t, w*10000+i, n, 40+rng.IntN(300), clock.Load())
				sum := stressSum(raw)
				if rng.IntN(2) == 0 {
					res, err := l.Append(raw)
					if err != nil {
						t.Errorf("Append: %v", err)
						return
					}
					if res.LastOffset-res.BaseOffset != int64(n-1) {
						t.Errorf("Append of %d records got %d..%d", n, res.BaseOffset, res.LastOffset)
					}
					model.add(t, res.BaseOffset, res.LastOffset, sum)
					continue
				}
				v, err := batch.Validate(raw, 1<<20)
				if err != nil {
					t.Error(err)
					return
				}
				cbBase := int64(-1)
				res, wait, err := l.AppendBatch(v, func(base int64) {
					cbBase = base
					// Under the writer lock, before visibility.
					if hw := l.HighWatermark(); hw > base {
						t.Errorf("callback for base %d: high watermark already %d", base, hw)
					}
				})
				if err != nil {
					t.Errorf("AppendBatch: %v", err)
					return
				}
				if cbBase != res.BaseOffset || res.LastOffset-res.BaseOffset != int64(n-1) {
					t.Errorf("AppendBatch: callback base %d, result %d..%d for %d records", cbBase, res.BaseOffset, res.LastOffset, n)
				}
				if wait != (sp.Kind == SyncAlways) && sp.Kind != SyncBytes {
					t.Errorf("AppendBatch under %v: wait %v", sp, wait)
				}
				// Under SyncAlways, one in four skips the wait (acks=0):
				// under DurableVisibility the visibility syncer must
				// still make it visible.
				if wait && (sp.Kind != SyncAlways || rng.IntN(4) != 0) {
					if err := l.WaitDurable(res.LastOffset + 1); err != nil {
						t.Errorf("WaitDurable(%d): %v", res.LastOffset+1, err)
						return
					}
				}
				model.add(t, res.BaseOffset, res.LastOffset, sum)
			}
		}()
	}

	// Readers.
	for r := range 2 {
		bg.Add(1)
		go func() {
			defer bg.Done()
			rng := rand.New(rand.NewPCG(seed, 100+uint64(r)))
			var buf []byte
			for !done.Load() {
				s0, h0 := l.LogStartOffset(), l.HighWatermark()
				o := s0 - 3 + rng.Int64N(h0-s0+7)
				maxBytes := 1 + rng.IntN(3000)
				var data []byte
				var next int64
				var c Chunk
				var err error
				useAppend := rng.IntN(2) == 0
				if useAppend {
					buf, next, err = l.ReadAppend(buf[:0], o, maxBytes)
					data = buf
				} else {
					c, err = l.Read(o, maxBytes)
					data, next = c.Data, c.NextOffset
				}
				s1, h1 := l.LogStartOffset(), l.HighWatermark()
				rp1 := l.RecoveryPoint()
				if err != nil {
					if !errors.Is(err, ErrOffsetOutOfRange) {
						t.Errorf("Read(%d): %v", o, err)
					} else if o >= s1 && o <= h0 {
						t.Errorf("Read(%d) out of range with start %d (after) and hw %d (before): %v", o, s1, h0, err)
					}
					continue
				}
				if o < s0 || o > h1 {
					t.Errorf("Read(%d) succeeded with start %d (before), hw %d (after)", o, s0, h1)
				}
				if len(data) == 0 {
					if o < h0 {
						t.Errorf("Read(%d) empty below hw %d", o, h0)
					}
					if next != o {
						t.Errorf("empty Read(%d) next %d", o, next)
					}
					c.Release()
					continue
				}
				want := o
				it := batch.NewIter(data)
				for it.Next() {
					b, err := batch.Validate(it.Batch(), 0)
					if err != nil {
						t.Errorf("Read(%d): bad batch: %v", o, err)
						break
					}
					if it.Pos() == 0 {
						if b.BaseOffset() > o || b.LastOffset() < o {
							t.Errorf("Read(%d) starts with batch %d..%d", o, b.BaseOffset(), b.LastOffset())
						}
					} else if b.BaseOffset() != want {
						t.Errorf("Read(%d): batch %d..%d after offset %d", o, b.BaseOffset(), b.LastOffset(), want)
					}
					if b.LastOffset() >= h1 {
						t.Errorf("Read(%d) returned batch %d..%d, hw after %d", o, b.BaseOffset(), b.LastOffset(), h1)
					}
					if dv && b.LastOffset() >= rp1 {
						t.Errorf("Read(%d) under DurableVisibility returned %d..%d, recovery point after %d", o, b.BaseOffset(), b.LastOffset(), rp1)
					}
					obs.add(t, b.BaseOffset(), b.LastOffset(), stressSum(b))
					want = b.NextOffset()
				}
				if err := it.Err(); err != nil {
					t.Errorf("Read(%d): partial batch at %d: %v", o, it.End(), err)
				}
				if next != want {
					t.Errorf("Read(%d): next %d, batches end at %d", o, next, want)
				}
				c.Release()
				c.Release() // idempotent
			}
		}()
	}

	// Long-poller: a rise of the high watermark after Advanced handed
	// out its channel closes that channel.
	var wakeups atomic.Int64
	bg.Add(1)
	go func() {
		defer bg.Done()
		for !done.Load() {
			ch := l.Advanced()
			h := l.HighWatermark()
			select {
			case <-ch:
				wakeups.Add(1)
			case <-time.After(time.Second):
				// The writer stores the high watermark before it closes
				// the channel: a poller whose timer fires between the two
				// sees the rise with the channel still open, so the rise
				// gets a second to close it.
				if h2 := l.HighWatermark(); h2 > h {
					select {
					case <-ch:
						wakeups.Add(1)
					case <-time.After(time.Second):
						t.Errorf("Advanced: high watermark rose %d -> %d, channel not closed", h, h2)
					}
				}
			}
		}
	}()

	// Watcher: monotonic marks and their order.
	bg.Add(1)
	go func() {
		defer bg.Done()
		var lastHW, lastStart, lastRP int64
		for !done.Load() {
			s := l.LogStartOffset()
			h := l.HighWatermark()
			rp := l.RecoveryPoint()
			e := l.LogEndOffset()
			if h < lastHW || s < lastStart || rp < lastRP {
				t.Errorf("went back: hw %d->%d, start %d->%d, recovery point %d->%d", lastHW, h, lastStart, s, lastRP, rp)
			}
			if s > h || h > e || rp > e {
				t.Errorf("start %d, hw %d, recovery point %d, end %d out of order", s, h, rp, e)
			}
			if dv && h > rp {
				t.Errorf("DurableVisibility: hw %d past the recovery point %d read after it", h, rp)
			}
			lastHW, lastStart, lastRP = h, s, rp
			if off, err := l.OffsetForTime(clock.Load() - 200); err != nil {
				t.Errorf("OffsetForTime: %v", err)
			} else if h2 := l.HighWatermark(); off < s || off > h2 {
				t.Errorf("OffsetForTime = %d, start before %d, hw after %d", off, s, h2)
			}
			time.Sleep(50 * time.Microsecond)
		}
	}()

	// Maintainer.
	bg.Add(1)
	go func() {
		defer bg.Done()
		rng := rand.New(rand.NewPCG(seed, 200))
		for !done.Load() {
			switch rng.IntN(6) {
			case 0:
				clock.Add(int64(1 + rng.IntN(40)))
			case 1:
				if _, err := l.ApplyRetention(); err != nil {
					t.Errorf("ApplyRetention: %v", err)
				}
			case 2:
				if rng.IntN(4) == 0 {
					s, h := l.LogStartOffset(), l.HighWatermark()
					if h > s {
						if err := l.DeleteRecordsBefore(s + rng.Int64N(h-s+1)); err != nil {
							t.Errorf("DeleteRecordsBefore: %v", err)
						}
					}
				}
			case 3:
				// No check of the recovery point after Flush (or
				// WaitDurable): sealRolled moves the durable mark before
				// the recovery point, so a Flush satisfied by a seal may
				// return (and checkpoint) a recovery point a moment
				// behind; that lag costs only a longer scan after a crash.
				if err := l.Flush(); err != nil {
					t.Errorf("Flush: %v", err)
				}
			case 4:
				// The log end with mu free is the written end, so this
				// must not fail as past the end.
				e := l.LogEndOffset()
				if err := l.WaitDurable(e); err != nil {
					t.Errorf("WaitDurable(%d): %v", e, err)
				}
			case 5:
				time.Sleep(200 * time.Microsecond)
			}
		}
	}()

	wg.Wait()
	// Let the readers see the tail under DurableVisibility.
	if err := l.Flush(); err != nil {
		t.Error(err)
	}
	done.Store(true)
	bg.Wait()
	if t.Failed() {
		l.Close()
		return
	}

	// Offsets: unique, each batch dense, all of them together dense.
	bases := make([]int64, 0, len(model.batches))
	for b := range model.batches {
		bases = append(bases, b)
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	end := int64(0)
	for _, b := range bases {
		if b != end {
			t.Fatalf("acknowledged batches not contiguous: %d follows end %d", b, end)
		}
		end = model.batches[b].last + 1
	}
	if len(bases) != appenders*perAppender {
		t.Fatalf("%d batches in the model, want %d", len(bases), appenders*perAppender)
	}
	for b, e := range obs.seen {
		if m, ok := model.batches[b]; !ok || m != e {
			t.Errorf("read at %d: %d..%d crc %x; appended: %v %d..%d crc %x", b, b, e.last, e.sum, ok, b, m.last, m.sum)
		}
	}
	if len(obs.seen) == 0 {
		t.Error("readers saw nothing")
	}
	start := l.LogStartOffset()
	t.Logf("%v dv=%v: %d batches, log %d..%d, %d distinct batches read, %d syncs, %d wakeups", sp, dv, len(bases), start, end, len(obs.seen), l.Syncs(), wakeups.Load())
	if h, e := l.HighWatermark(), l.LogEndOffset(); h != end || e != end {
		t.Errorf("after all appends: hw %d, end %d, want %d", h, e, end)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if s, h, e := l.LogStartOffset(), l.HighWatermark(), l.LogEndOffset(); s != start || h != end || e != end {
		t.Fatalf("reopened: start %d hw %d end %d, want %d, %d, %d", s, h, e, start, end, end)
	}
	o, first := start, true
	for o < end {
		c, err := l.Read(o, 1<<20)
		if err != nil {
			t.Fatalf("reopened: Read(%d): %v", o, err)
		}
		for p := 0; p < len(c.Data); {
			n := mustSize(t, c.Data[p:])
			b := batch.Batch(c.Data[p : p+n])
			if first {
				if b.BaseOffset() > o || b.LastOffset() < o {
					t.Fatalf("reopened: Read(%d) starts with batch %d..%d", o, b.BaseOffset(), b.LastOffset())
				}
				first = false
			} else if b.BaseOffset() != o {
				t.Fatalf("reopened: batch %d..%d where %d was expected", b.BaseOffset(), b.LastOffset(), o)
			}
			m, ok := model.batches[b.BaseOffset()]
			if !ok || m.last != b.LastOffset() || m.sum != stressSum(b) {
				t.Fatalf("reopened: batch %d..%d differs from the one appended (%v %d crc %x vs %x)", b.BaseOffset(), b.LastOffset(), ok, m.last, m.sum, stressSum(b))
			}
			o = b.NextOffset()
			p += n
		}
		if c.NextOffset != o {
			t.Fatalf("reopened: next %d, batches end at %d", c.NextOffset, o)
		}
		c.Release()
	}
}
