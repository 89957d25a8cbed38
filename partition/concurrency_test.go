package partition

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idemlog/idemlog/batch"
)

// TestConcurrentAppendReadRetention runs appenders, readers and retention at
// once (meaningful under -race): readers must only ever see whole, valid
// batches with dense offsets below the high watermark, and acknowledged
// offsets must be unique.
func TestConcurrentAppendReadRetention(t *testing.T) {
	t.Parallel()
	opts := smallSegments(8 << 10)
	opts.RetentionAge = -1
	opts.RetentionBytes = 64 << 10
	l, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const appenders, perAppender = 4, 300
	var wg sync.WaitGroup
	var done atomic.Bool
	seen := make([]atomic.Int32, appenders*perAppender*4)
	for w := range appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perAppender {
				res, err := l.Append(makeBatch(t, w*1000+i, 1+i%4, 100, int64(i)))
				if err != nil {
					t.Error(err)
					return
				}
				for o := res.BaseOffset; o <= res.LastOffset; o++ {
					if seen[o].Add(1) != 1 {
						t.Errorf("offset %d assigned twice", o)
					}
				}
			}
		}()
	}
	var readers sync.WaitGroup
	for range 3 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for !done.Load() {
				off := l.LogStartOffset()
				for off < l.HighWatermark() {
					c, err := l.Read(off, 4096)
					if err != nil {
						// Retention may pass us; restart from the new start.
						break
					}
					for p := 0; p < len(c.Data); {
						b, err := batch.Validate(c.Data[p:p+mustSize(t, c.Data[p:])], 0)
						if err != nil {
							t.Errorf("reader saw a bad batch at %d: %v", off, err)
							return
						}
						if b.LastOffset() < off || b.BaseOffset() >= c.HighWatermark {
							t.Errorf("batch %d..%d for offset %d, hw %d", b.BaseOffset(), b.LastOffset(), off, c.HighWatermark)
						}
						off = b.NextOffset()
						p += len(b)
					}
					c.Release()
				}
			}
		}()
	}
	var ret sync.WaitGroup
	ret.Add(1)
	go func() {
		defer ret.Done()
		for !done.Load() {
			if _, err := l.ApplyRetention(); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	wg.Wait()
	done.Store(true)
	readers.Wait()
	ret.Wait()
}

func mustSize(t *testing.T, b []byte) int {
	n, err := batch.Size(b)
	if err != nil {
		t.Fatalf("chunk holds a partial batch: %v", err)
	}
	return n
}

// TestGroupCommit: concurrent appenders under SyncAlways share syncs.
func TestGroupCommit(t *testing.T) {
	t.Parallel()
	for _, durable := range []bool{false, true} {
		opts := Options{Sync: SyncPolicy{Kind: SyncAlways}, DurableVisibility: durable}
		l, err := Open(t.TempDir(), opts)
		if err != nil {
			t.Fatal(err)
		}
		const appenders, each = 16, 40
		var wg sync.WaitGroup
		for w := range appenders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					res, err := l.Append(makeBatch(t, w*100+i, 1, 1000, 1))
					if err != nil {
						t.Error(err)
						return
					}
					// Acknowledged means durable, and visible.
					if l.RecoveryPoint() <= res.LastOffset || l.HighWatermark() <= res.LastOffset {
						t.Errorf("acknowledged %d with recovery point %d, hw %d", res.LastOffset, l.RecoveryPoint(), l.HighWatermark())
					}
				}
			}()
		}
		wg.Wait()
		syncs := l.sync.syncs.Load()
		if syncs >= appenders*each {
			t.Errorf("durable=%v: %d syncs for %d appends: no group commit", durable, syncs, appenders*each)
		}
		t.Logf("durable=%v: %d appends, %d syncs", durable, appenders*each, syncs)
		l.Close()
	}
}

// TestDurableVisibility: with DurableVisibility the high watermark never
// passes the recovery point.
func TestDurableVisibility(t *testing.T) {
	t.Parallel()
	l, err := Open(t.TempDir(), Options{Sync: SyncPolicy{Kind: SyncAlways}, DurableVisibility: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			hw := l.HighWatermark()
			if rp := l.RecoveryPoint(); hw > rp {
				t.Errorf("high watermark %d above the durable point %d", hw, rp)
				return
			}
		}
	}()
	for i := range 200 {
		if _, err := l.Append(makeBatch(t, i, 1, 100, 1)); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
}

func TestSyncPolicies(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want SyncPolicy
		bad  bool
	}{
		{"never", SyncPolicy{Kind: SyncNever}, false},
		{"always", SyncPolicy{Kind: SyncAlways}, false},
		{"interval=5ms", SyncPolicy{Kind: SyncInterval, Interval: 5e6}, false},
		{"bytes=4096", SyncPolicy{Kind: SyncBytes, Bytes: 4096}, false},
		{"interval=0s", SyncPolicy{}, true},
		{"bytes=-1", SyncPolicy{}, true},
		{"sometimes", SyncPolicy{}, true},
	} {
		got, err := ParseSyncPolicy(c.in)
		if (err != nil) != c.bad || (!c.bad && (got != c.want || got.String() != c.in)) {
			t.Errorf("ParseSyncPolicy(%q) = %+v, %v", c.in, got, err)
		}
	}
	// interval and bytes move the recovery point without Flush.
	for _, p := range []SyncPolicy{{Kind: SyncInterval, Interval: 2e6}, {Kind: SyncBytes, Bytes: 3000}} {
		l, err := Open(t.TempDir(), Options{Sync: p})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			if _, err := l.Append(makeBatch(t, i, 1, 500, 1)); err != nil {
				t.Fatal(err)
			}
		}
		if p.Kind == SyncBytes && l.RecoveryPoint() < 20-6 {
			t.Errorf("bytes policy: recovery point %d after 20 appends of ~570 B", l.RecoveryPoint())
		}
		for i := 0; p.Kind == SyncInterval && l.RecoveryPoint() < 20 && i < 1000; i++ {
			waitBriefly()
		}
		if p.Kind == SyncInterval && l.RecoveryPoint() < 20 {
			t.Errorf("interval policy: recovery point %d never reached 20", l.RecoveryPoint())
		}
		l.Close()
	}
}
