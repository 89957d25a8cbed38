package partition

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/idemlog/idemlog/internal/testutil"
	"github.com/idemlog/idemlog/segment"
)

func offsetTimeBatch(t testing.TB, tss []int64, valueSize int) []byte {
	t.Helper()
	return testutil.Batch(t, testutil.BatchSpec{Timestamps: tss, Value: func(i int) []byte {
		v := bytes.Repeat([]byte{'x'}, valueSize)
		copy(v, fmt.Sprint(i))
		return v
	}})
}

// offsetTimeExpect is OffsetForTime's contract computed by brute force over
// every batch readable from the log start.
func offsetTimeExpect(t testing.TB, l *Log, ts int64) int64 {
	start, hw := l.LogStartOffset(), l.HighWatermark()
	for _, b := range readAll(t, l) {
		if b.MaxTimestamp() >= ts && b.LastOffset() >= start {
			return max(b.BaseOffset(), start)
		}
	}
	return hw
}

func TestOffsetForTimeModel(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 23))
			dir := t.TempDir()
			opts := Options{Segment: segment.Options{MaxBytes: 4096, IndexMaxBytes: 120, IndexIntervalBytes: 200, ReserveAhead: 4096},
				RetentionAge: -1}
			if seed%2 == 0 {
				opts.RetentionBytes = 12000
			}
			l, err := Open(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { l.Close() }()
			clock := int64(1000)
			for step := 0; step < 400; step++ {
				switch r := rng.IntN(100); {
				case r < 85:
					n := 1 + rng.IntN(4)
					tss := make([]int64, n)
					for i := range tss {
						clock += int64(rng.IntN(20))
						tss[i] = clock - int64(rng.IntN(300))
						if rng.IntN(20) == 0 {
							tss[i] = int64(rng.IntN(3)) // 0..2
						}
					}
					if _, err := l.Append(offsetTimeBatch(t, tss, 20+rng.IntN(200))); err != nil {
						t.Fatal(err)
					}
				case r < 88:
					if hw := l.HighWatermark(); hw > l.LogStartOffset() {
						if err := l.DeleteRecordsBefore(l.LogStartOffset() + rng.Int64N(hw-l.LogStartOffset()+1)); err != nil {
							t.Fatal(err)
						}
					}
				case r < 91:
					if _, err := l.ApplyRetention(); err != nil {
						t.Fatal(err)
					}
				case r < 95:
					if err := l.Close(); err != nil {
						t.Fatal(err)
					}
					if l, err = Open(dir, opts); err != nil {
						t.Fatal(err)
					}
				default:
					if err := l.Flush(); err != nil {
						t.Fatal(err)
					}
					l.Kill()
					if l, err = Open(dir, opts); err != nil {
						t.Fatal(err)
					}
				}
				for range 4 {
					ts := clock - int64(rng.IntN(int(clock)+50))
					if rng.IntN(4) == 0 {
						ts = clock + int64(rng.IntN(50))
					}
					got, err := l.OffsetForTime(ts)
					if err != nil {
						t.Fatal(err)
					}
					if want := offsetTimeExpect(t, l, ts); got != want {
						t.Fatalf("step %d: OffsetForTime(%d) = %d, want %d (start %d hw %d segs %v)", step, ts, got, want, l.LogStartOffset(), l.HighWatermark(), l.SegmentBases())
					}
				}
			}
		})
	}
}
