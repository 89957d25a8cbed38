package partition

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/errcode"
	"github.com/idemlog/idemlog/segment"
	"github.com/idemlog/idemlog/txnindex"
)

// Log compaction (Kafka's log cleaner, cleanup.policy=compact): see the
// package documentation, section Compaction, for the layout and the swap.

// cleanerCheckpointFile holds the first dirty offset, Kafka's
// cleaner-offset-checkpoint (kept per partition, as the other checkpoints).
const cleanerCheckpointFile = "cleaner-offset-checkpoint"

// DefaultOffsetMapKeys is the number of keys one cleaning pass maps by
// default: Kafka's 128 MiB log.cleaner.dedupe.buffer.size at 24 bytes a
// slot and a load factor of 0.9. idemlog maps exact keys, so a key costs
// its length plus about 60 bytes of map overhead.
const DefaultOffsetMapKeys = 5_033_164

// ErrCleanAborted: a cleaning pass stopped because the log was closed or
// retention removed a segment it was copying; nothing changed on disk.
var ErrCleanAborted = errcode.New(errcode.UnknownServerError, "cleaning aborted")

// CleanConfig is what one cleaning pass reads: the topic's configs at the
// pass's start, as Kafka reads log.config.
type CleanConfig struct {
	// DeleteRetention is delete.retention.ms: how long after the pass
	// that first copies a tombstone (or a marker whose transaction has no
	// data left) it is kept.
	DeleteRetention time.Duration
	// MinLag is min.compaction.lag.ms: a segment whose newest record is
	// younger is not cleaned.
	MinLag time.Duration
	// MaxLag is max.compaction.lag.ms: a dirty segment whose first batch
	// is older makes the log due whatever its dirty ratio. <= 0: never.
	MaxLag time.Duration
	// MinDirtyRatio is min.cleanable.dirty.ratio (Due's threshold).
	MinDirtyRatio float64
	// MaxKeys bounds the offset map (0: DefaultOffsetMapKeys): a pass
	// that meets more distinct keys cleans up to the last one it mapped
	// and leaves the rest to the next pass.
	MaxKeys int
	// Throttle bounds the pass's I/O (log.cleaner.io.max.bytes.per.second);
	// nil: unbounded.
	Throttle *Throttle
	// StableEnd returns the last stable offset: nothing at or above it is
	// cleaned (an undecided transaction). nil: the high watermark.
	StableEnd func() int64
	// Stopped, if set, is polled during the pass: true aborts it
	// (ErrCleanAborted), as closing the log does.
	Stopped func() bool
}

// stopped reports whether the pass must stop.
func (c *cleaner) stopped() bool {
	return c.log.shut.Load() || (c.cfg.Stopped != nil && c.cfg.Stopped())
}

// CleanStats describes one pass.
type CleanStats struct {
	// FirstDirty and EndOffset are the dirty offsets the pass started
	// from and the new checkpoint (the pass cleaned what lies below it).
	FirstDirty, EndOffset int64
	// Groups is the number of cleaned segments swapped in.
	Groups int
	// BytesRead is the size of the source segments copied, MapBytes what
	// the offset map was built from, BytesWritten the new segments' size.
	BytesRead, MapBytes, BytesWritten int64
	// RecordsRead and RecordsKept count data records of the copy;
	// Invalid counts the records dropped for having no key.
	RecordsRead, RecordsKept, Invalid int
}

// cleanRange is a log's cleanable range at one moment.
type cleanRange struct {
	segs              []*segRef
	firstDirty        int64
	firstUncleanable  int64 // lowered to a segment base
	cleanBytes, dirty int64 // sizes before and from the first dirty segment, up to firstUncleanable
	due               bool  // max.compaction.lag.ms passed for a dirty segment
}

// cleanerState is the log's cleaning state.
type cleanerState struct {
	// mu serializes passes of one log (the engine's cleaner runs one at a
	// time anyway) and guards firstDirty.
	mu sync.Mutex
	// firstDirty is the checkpointed first dirty offset; -1 until read.
	firstDirty int64
	loaded     bool
	// swapping is set while a group whose first segment is at swapFrom is
	// being swapped in (both under the log's mu): retention and
	// DeleteRecordsBefore then leave the segments from swapFrom on in the
	// list, so that the swap finds them there and no deletion removes by
	// name a file the swap has just put in their place.
	swapping bool
	swapFrom int64
}

// detachableLocked reports whether the segment at base may be taken off
// the list by retention now (under mu).
func (l *Log) detachableLocked(base int64) bool {
	return !l.cleaner.swapping || base < l.cleaner.swapFrom
}

// cleanStep runs the log's cleanStepHook knob, if any, at a step of a
// swap.
func (l *Log) cleanStep(step string) {
	if h := l.opts.private.cleanStepHook; h != nil {
		h(step)
	}
}

// loadFirstDirty returns the checkpointed first dirty offset, reset to the
// log start when it lies outside [log start, log end] (Kafka's
// cleanableOffsets). Under c.mu.
func (l *Log) loadFirstDirty() int64 {
	c := &l.cleaner
	if !c.loaded {
		ck, err := loadCheckpoint(filepath.Join(l.dir, cleanerCheckpointFile))
		c.firstDirty = ck.offset
		if err != nil || ck.state == checkpointBad || ck.state == checkpointMissing {
			c.firstDirty = -1
		}
		c.loaded = true
	}
	start, end := l.logStart.Load(), l.hw.Load()
	if c.firstDirty < start || c.firstDirty > end {
		c.firstDirty = start
	}
	return c.firstDirty
}

// FirstDirtyOffset returns the offset from which the log has not been
// cleaned yet (the cleaner's checkpoint, reset into the log's range).
func (l *Log) FirstDirtyOffset() int64 {
	l.cleaner.mu.Lock()
	defer l.cleaner.mu.Unlock()
	return l.loadFirstDirty()
}

// cleanableRange computes the range of a pass (Kafka's
// LogCleanerManager.cleanableOffsets and calculateCleanableBytes). Under
// c.mu. The segments are the live list at the time; only segments below
// the active one, the high watermark and the last stable offset are
// cleanable. A rolled segment the maintainer has not sealed yet may be:
// its bytes below the high watermark are final, and the seal, which
// writes through its open descriptors, works on the files a swap renamed.
func (l *Log) cleanableRange(cfg CleanConfig) cleanRange {
	segs := *l.segs.Load()
	r := cleanRange{segs: segs, firstDirty: l.loadFirstDirty()}
	if len(segs) < 2 {
		r.firstUncleanable = r.firstDirty
		return r
	}
	bound := segs[len(segs)-1].Base() // the active segment
	bound = min(bound, l.hw.Load())
	if cfg.StableEnd != nil {
		bound = min(bound, cfg.StableEnd())
	}
	nowMs := l.opts.Now().UnixMilli()
	dirtyIdx := segIndex(segs, r.firstDirty)
	if cfg.MinLag > 0 {
		for i := max(dirtyIdx, 0); i < len(segs)-1; i++ {
			if segMaxTimestamp(l.dir, segs[i]) > nowMs-cfg.MinLag.Milliseconds() {
				bound = min(bound, segs[i].Base())
				break
			}
		}
	}
	bound = max(bound, r.firstDirty)
	if i := segIndex(segs, bound); i >= 0 {
		bound = segs[i].Base()
	}
	r.firstUncleanable = bound
	for i, s := range segs[:len(segs)-1] {
		if s.Base() >= bound {
			break
		}
		size := s.Published()
		end := segs[i+1].Base()
		if s.Base() < r.firstDirty {
			r.cleanBytes += size
		}
		if end > r.firstDirty {
			r.dirty += size
			if cfg.MaxLag > 0 {
				if first := firstBatchTimestamp(s); first > 0 && first < nowMs-cfg.MaxLag.Milliseconds() {
					r.due = true
				}
			}
		}
	}
	return r
}

// segIndex returns the index of the segment holding offset (the last
// whose base is <= offset), -1 if none.
func segIndex(segs []*segRef, offset int64) int {
	return sort.Search(len(segs), func(i int) bool { return segs[i].Base() > offset }) - 1
}

// segMaxTimestamp is a sealed segment's largest timestamp, its file's
// modification time if no batch carried one (Kafka's largestTimestamp).
func segMaxTimestamp(dir string, s *segRef) int64 {
	ts, _ := s.MaxTimestamp()
	if ts < 0 {
		if fi, err := os.Stat(filepath.Join(dir, segment.FileName(s.Base(), ".log"))); err == nil {
			ts = fi.ModTime().UnixMilli()
		}
	}
	return ts
}

// firstBatchTimestamp is the max timestamp of a segment's first batch
// that carries one (needCompactionNow).
func firstBatchTimestamp(s *segRef) int64 {
	data := s.Read(0, s.Published())
	it := batch.NewIter(data)
	for it.Next() {
		if ts := it.Batch().MaxTimestamp(); ts > 0 {
			return ts
		}
	}
	return -1
}

// Dirtiness reports a compacted log's state for choosing the log to clean
// (Kafka's grabFilthiestCompactedLog): the dirty ratio, cleanable bytes
// over clean plus cleanable, and whether it is due: cleanable bytes and
// either a ratio above MinDirtyRatio or max.compaction.lag.ms passed. A
// dormant log is never due: nothing was written since it was closed.
func (l *Log) Dirtiness(cfg CleanConfig) (ratio float64, cleanable int64, due bool) {
	if l.dormant.Load() || l.shut.Load() {
		return 0, 0, false
	}
	l.cleaner.mu.Lock()
	r := l.cleanableRange(cfg)
	l.cleaner.mu.Unlock()
	if r.dirty == 0 {
		return 0, 0, false
	}
	ratio = float64(r.dirty) / float64(r.cleanBytes+r.dirty)
	return ratio, r.dirty, r.due || ratio > cfg.MinDirtyRatio
}

// Clean runs one cleaning pass (Kafka's Cleaner.doClean): it maps the
// newest offset of every key in the cleanable range, then rewrites every
// segment from the first up to the one holding the last mapped offset,
// group by group, keeping the newest record of each key, tombstones until
// their delete horizon, the data of committed transactions, the markers
// that still have data or whose horizon has not passed, and the last batch
// of every producer (emptied if need be); each group's new segment is
// swapped in crash-safely. Appends and reads go on meanwhile: the writer's
// lock is taken only to swap the segment list. It returns what the pass
// did; a pass with nothing to clean returns zero stats and no error.
func (l *Log) Clean(cfg CleanConfig) (CleanStats, error) {
	if cfg.MaxKeys <= 0 {
		cfg.MaxKeys = DefaultOffsetMapKeys
	}
	c := &l.cleaner
	c.mu.Lock()
	defer c.mu.Unlock()
	if l.dormant.Load() || l.shut.Load() {
		return CleanStats{}, nil
	}
	r := l.cleanableRange(cfg)
	st := CleanStats{FirstDirty: r.firstDirty, EndOffset: r.firstDirty}
	if r.firstUncleanable <= r.firstDirty {
		return st, nil
	}
	now := l.opts.Now().UnixMilli()
	cl := &cleaner{log: l, cfg: cfg, now: now, keys: make(map[string]int32), stats: &st}
	// The segments of the pass hold a reference each, so that retention
	// cannot close one under the copy; a segment it retired meanwhile
	// fails to acquire and the pass stops.
	held := make([]*segRef, 0, len(r.segs))
	defer func() {
		for _, s := range held {
			s.release()
		}
	}()
	for _, s := range r.segs[:len(r.segs)-1] {
		if s.Base() >= r.firstUncleanable {
			break
		}
		if !s.acquire() {
			return st, fmt.Errorf("cannot clean %s: %w", l.dir, ErrCleanAborted)
		}
		held = append(held, s)
	}
	end, err := cl.buildOffsetMap(held, r.firstDirty, r.firstUncleanable)
	if err != nil {
		return st, err
	}
	st.EndOffset = end
	if end <= r.firstDirty {
		return st, nil
	}
	n := segIndex(held, end-1) + 1
	next := func(i int) int64 {
		if i+1 < len(r.segs) {
			return r.segs[i+1].Base()
		}
		return math.MaxInt64
	}
	cl.protected = producerLasts(r.segs, l.hw.Load())
	for _, g := range groupSegments(held[:n], next, l.groupMaxBytes(), l.groupMaxIndexEntries(), end) {
		if err := cl.cleanGroup(held[g[0]:g[1]], next(g[1]-1), end); err != nil {
			return st, err
		}
		st.Groups++
	}
	c.firstDirty = end
	if err := writeCheckpoint(filepath.Join(l.dir, cleanerCheckpointFile), l.dir, end); err != nil {
		return st, fmt.Errorf("cannot checkpoint cleaning of %s: %w", l.dir, err)
	}
	return st, nil
}

// groupMaxBytes is segment.bytes: the most bytes of source segments that
// go into one cleaned segment.
func (l *Log) groupMaxBytes() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rollBytes > 0 {
		return l.rollBytes
	}
	return l.segmentMaxBytes()
}

// groupMaxIndexEntries bounds the index entries of a group by
// segment.index.bytes (the time index, 12 bytes an entry, is the larger).
func (l *Log) groupMaxIndexEntries() int64 {
	n := int64(l.opts.Segment.IndexMaxBytes)
	if n <= 0 {
		n = segment.DefaultIndexMaxBytes
	}
	return n / 12
}

// groupSegments groups segs greedily in offset order (Kafka's
// groupSegmentsBySize): a group takes the following segments while their
// summed size stays within maxBytes, their estimated index entries within
// maxEntries, and the group's offsets within an int32 of its base (the
// last candidate ends at end-1, the others at the next base - 1). It
// returns [from, to) index pairs.
func groupSegments(segs []*segRef, next func(int) int64, maxBytes, maxEntries, end int64) [][2]int {
	interval := int64(segment.DefaultIndexIntervalBytes)
	var groups [][2]int
	for i := 0; i < len(segs); {
		j := i + 1
		size := segs[i].Published()
		entries := size / interval
		for j < len(segs) {
			s := segs[j]
			last := next(j) - 1
			if j == len(segs)-1 {
				last = min(last, end-1)
			}
			if size+s.Published() > maxBytes || entries+s.Published()/interval > maxEntries ||
				(s.Published() > 0 && last-segs[i].Base() > math.MaxInt32) {
				break
			}
			size += s.Published()
			entries += s.Published() / interval
			j++
		}
		groups = append(groups, [2]int{i, j})
		i = j
	}
	return groups
}

// producerLast is the batch that keeps a producer's state in the log.
type producerLast struct {
	lastData int64 // last offset of its newest data batch, -1 if none
	epoch    int16 // epoch of its newest batch
}

// producerLasts walks the headers of the log below hw and returns, per
// producer, its newest data batch (or, for one with none, its epoch):
// the batches Kafka's cleaner retains for the producer-state map. idemlog
// keeps them for every producer in the log, expired or not: the state an
// open rebuilds from the log is then exactly what it was.
func producerLasts(segs []*segRef, hw int64) map[int64]producerLast {
	out := map[int64]producerLast{}
	for _, s := range segs {
		if !s.acquire() {
			continue
		}
		data := s.Read(0, s.Published())
		it := batch.NewIter(data)
		for it.Next() {
			b := it.Batch()
			if b.BaseOffset() >= hw {
				break
			}
			if !b.HasProducerID() {
				continue
			}
			p, ok := out[b.ProducerID()]
			if !ok {
				p.lastData = -1
			}
			p.epoch = b.ProducerEpoch()
			if !b.IsControl() {
				p.lastData = b.LastOffset()
			}
			out[b.ProducerID()] = p
		}
		s.release()
	}
	return out
}

// cleaner is one pass's working state.
type cleaner struct {
	log   *Log
	cfg   CleanConfig
	now   int64 // the pass's clock, ms
	stats *CleanStats
	// keys maps a key to its slot in offsets: the newest offset of the
	// key in the dirty range (Kafka's offset map, with exact keys).
	keys    map[string]int32
	offsets []int64
	latest  int64 // the map's latest offset
	// protected is the last batch of every producer (producerLasts).
	protected map[int64]producerLast
	dec       batch.Decoder
	builder   *batch.Builder
	headers   []batch.Header
	out       []byte
}

// buildOffsetMap maps the keys of [firstDirty, upper) (Kafka's
// buildOffsetMap) and returns the pass's end offset: the offset after
// the last mapped batch, or after the last key that fit in the map.
func (c *cleaner) buildOffsetMap(segs []*segRef, firstDirty, upper int64) (int64, error) {
	c.latest = firstDirty - 1
	start := segIndex(segs, firstDirty)
	if start < 0 {
		start = 0
	}
	var aborted []txnindex.Entry
	aborted = c.log.AbortedTxns(firstDirty, upper, aborted)
	meta := newTxnMeta(aborted)
	for i := start; i < len(segs); i++ {
		s := segs[i]
		data := s.Read(0, s.Published())
		c.stats.MapBytes += int64(len(data))
		c.cfg.Throttle.wait(int64(len(data)))
		it := batch.NewIter(data)
		for it.Next() {
			if c.stopped() {
				return 0, fmt.Errorf("cannot clean %s: %w", c.log.dir, ErrCleanAborted)
			}
			b := it.Batch()
			if b.BaseOffset() >= upper {
				break
			}
			if b.LastOffset() < firstDirty {
				continue
			}
			var abortedData bool
			if b.IsControl() {
				meta.onControl(b)
			} else {
				abortedData = meta.onData(b)
			}
			if !b.IsControl() && !abortedData {
				full, err := c.mapBatch(b, firstDirty)
				if err != nil {
					return 0, fmt.Errorf("cannot clean segment %d of %s: %w", s.Base(), c.log.dir, err)
				}
				if full {
					return c.latest + 1, nil
				}
			}
			c.latest = max(c.latest, b.LastOffset())
		}
		if err := it.Err(); err != nil {
			return 0, fmt.Errorf("cannot clean segment %d of %s: %w", s.Base(), c.log.dir, err)
		}
		// Offsets a gap skipped (up to the next segment) count as mapped.
		if i+1 < len(segs) && segs[i+1].Base() <= upper {
			c.latest = max(c.latest, segs[i+1].Base()-1)
		} else {
			c.latest = max(c.latest, upper-1)
		}
	}
	return c.latest + 1, nil
}

// mapBatch adds b's keyed records at or above firstDirty to the map and
// reports whether the map filled (Kafka stops before the key that did
// not fit, and the pass ends at the last mapped offset).
func (c *cleaner) mapBatch(b batch.Batch, firstDirty int64) (full bool, err error) {
	it, err := c.dec.Records(b)
	if err != nil {
		return false, err
	}
	var r batch.Record
	for it.Next(&r) {
		if r.Key == nil || r.Offset < firstDirty {
			continue
		}
		if len(c.keys) >= c.cfg.MaxKeys {
			return true, nil
		}
		if i, ok := c.keys[string(r.Key)]; ok {
			c.offsets[i] = r.Offset
		} else {
			c.keys[string(r.Key)] = int32(len(c.offsets))
			c.offsets = append(c.offsets, r.Offset)
		}
		c.latest = r.Offset
	}
	return false, it.Err()
}

// lookup returns the newest offset of key in the dirty range, -1 if the
// key is not there.
func (c *cleaner) lookup(key []byte) int64 {
	if i, ok := c.keys[string(key)]; ok {
		return c.offsets[i]
	}
	return -1
}
