package partition

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idemlog/idemlog/segment"
)

// Lookups by time racing appends, rolls, retention (recycling segment
// files) and DeleteRecordsBefore: with one record per batch and timestamp
// 10*offset, OffsetForTime(10*k) is exactly k whenever k is at or above
// the log start and below the high watermark. Reading the found batch's
// offset after releasing the segment reference faulted (SIGSEGV) whenever
// retention recycled and unmapped the segment in between: about one run in
// a few hundred.
func TestOffsetForTimeRace(t *testing.T) {
	for _, kind := range []SyncKind{SyncNever, SyncAlways} {
		opts := Options{Segment: segment.Options{MaxBytes: 32 << 10, IndexMaxBytes: 4096, IndexIntervalBytes: 512, ReserveAhead: 8192},
			RetentionAge: -1, RetentionBytes: 96 << 10, Sync: SyncPolicy{Kind: kind}}
		l, err := Open(t.TempDir(), opts)
		if err != nil {
			t.Fatal(err)
		}
		var done atomic.Bool
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			defer done.Store(true)
			rng := rand.New(rand.NewPCG(1, 2))
			for i := 0; i < 1200; i++ {
				off := l.LogEndOffset()
				if _, err := l.Append(makeBatch(t, i, 1, 50+rng.IntN(3000), 10*off)); err != nil {
					t.Error(err)
					return
				}
				if i%60 == 59 {
					if _, err := l.ApplyRetention(); err != nil {
						t.Error(err)
						return
					}
				}
				if i%150 == 0 {
					s, h := l.LogStartOffset(), l.HighWatermark()
					if err := l.DeleteRecordsBefore(s + (h-s)/4); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(3, 4))
			for !done.Load() {
				s, h := l.LogStartOffset(), l.HighWatermark()
				if h <= s {
					continue
				}
				k := s + rng.Int64N(h-s)
				got, err := l.OffsetForTime(10 * k)
				if err != nil {
					t.Error(err)
					return
				}
				if s2 := l.LogStartOffset(); s2 == s && got != k {
					t.Errorf("OffsetForTime(%d) = %d, want %d (start %d hw %d)", 10*k, got, k, s, h)
					return
				}
				got, err = l.OffsetForTime(10*k - 5)
				if err != nil {
					t.Error(err)
					return
				}
				if s2 := l.LogStartOffset(); s2 == s && got != k {
					t.Errorf("OffsetForTime(%d) = %d, want %d (start %d hw %d)", 10*k-5, got, k, s, h)
					return
				}
			}
		}()
		wg.Wait()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
