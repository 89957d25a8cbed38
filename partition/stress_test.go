package partition

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idemlog/idemlog/batch"
)

// TestStressDurableVisibility: appenders under SyncAlways with
// DurableVisibility and tiny segments (many rolls during group syncs),
// readers walking from the log start, DeleteRecordsBefore moving the start.
// Readers must never get an error other than out-of-range below the start,
// nor a batch past the one asked for.
func TestStressDurableVisibility(t *testing.T) {
	t.Parallel()
	for _, dv := range []bool{true, false} {
		opts := smallSegments(4 << 10)
		opts.Sync = SyncPolicy{Kind: SyncAlways}
		opts.DurableVisibility = dv
		opts.RetentionAge = -1
		l, err := Open(t.TempDir(), opts)
		if err != nil {
			t.Fatal(err)
		}
		var wg, rg sync.WaitGroup
		var done atomic.Bool
		var acked atomic.Int64
		for w := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 300 {
					res, err := l.Append(makeBatch(t, w*1000+i, 1+i%3, 150, 1))
					if err != nil {
						t.Error(err)
						return
					}
					storeMax(&acked, res.LastOffset+1)
				}
			}()
		}
		for range 3 {
			rg.Add(1)
			go func() {
				defer rg.Done()
				for !done.Load() {
					off := l.LogStartOffset()
					for off < l.HighWatermark() {
						c, err := l.Read(off, 2048)
						if err != nil {
							if off < l.LogStartOffset() {
								break
							}
							t.Errorf("dv=%v: Read(%d), start %d hw %d: %v", dv, off, l.LogStartOffset(), l.HighWatermark(), err)
							return
						}
						b := batch.Batch(c.Data)
						if len(c.Data) > 0 && (b.BaseOffset() > off || b.LastOffset() < off) {
							t.Errorf("dv=%v: Read(%d) gave batch %d..%d", dv, off, b.BaseOffset(), b.LastOffset())
						}
						off = c.NextOffset
						c.Release()
					}
				}
			}()
		}
		rg.Add(1)
		go func() {
			defer rg.Done()
			for !done.Load() {
				if hw := l.HighWatermark(); hw > 200 {
					_ = l.DeleteRecordsBefore(hw - 200)
				}
			}
		}()
		wg.Wait()
		done.Store(true)
		rg.Wait()
		if hw := l.HighWatermark(); hw < acked.Load() {
			t.Errorf("dv=%v: high watermark %d below acknowledged end %d", dv, hw, acked.Load())
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
