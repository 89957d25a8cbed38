package engine

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/idemlog/idemlog/partition"
)

// The log cleaner (Kafka's LogCleaner with one thread): it compacts the
// partitions whose cleanup.policy lists compact, the internal topics
// included, one log at a time, the dirtiest first (partition.Log.Clean).

// CleanerOptions configure the log cleaner (Kafka's log.cleaner.* broker
// configs).
type CleanerOptions struct {
	// Disable is log.cleaner.enable=false: nothing is compacted.
	Disable bool
	// Backoff is log.cleaner.backoff.ms: how long the cleaner sleeps when
	// no log is due (0: 15 s).
	Backoff time.Duration
	// MaxKeys bounds a pass's offset map (log.cleaner.dedupe.buffer.size
	// in keys; 0: partition.DefaultOffsetMapKeys).
	MaxKeys int
	// IOMaxBytesPerSecond is log.cleaner.io.max.bytes.per.second: the
	// cleaner's reads and writes together (0: unbounded).
	IOMaxBytesPerSecond float64
}

// cleanSettings are a topic's compaction configs.
type cleanSettings struct {
	deleteRetentionMs int64   // delete.retention.ms
	minLagMs          int64   // min.compaction.lag.ms
	maxLagMs          int64   // max.compaction.lag.ms
	dirtyRatio        float64 // min.cleanable.dirty.ratio
}

var defaultCleanSettings = cleanSettings{deleteRetentionMs: 86_400_000, maxLagMs: math.MaxInt64, dirtyRatio: 0.5}

func msDuration(ms int64) time.Duration {
	if ms >= maxDurationMs {
		return 0
	}
	return time.Duration(ms) * time.Millisecond
}

// cleanConfig is the partition's pass configuration now.
func (e *Engine) cleanConfig(p *Partition) partition.CleanConfig {
	s := p.settings.Load().clean
	return partition.CleanConfig{
		DeleteRetention: msDuration(s.deleteRetentionMs),
		MinLag:          msDuration(s.minLagMs),
		MaxLag:          msDuration(s.maxLagMs),
		MinDirtyRatio:   s.dirtyRatio,
		MaxKeys:         e.opts.Cleaner.MaxKeys,
		Throttle:        e.cleanThrottle,
		StableEnd:       p.LastStableOffset,
		Stopped:         e.cleanerStopping.Load,
	}
}

// CleanLogs runs cleaning passes until no compacted partition is due (a
// dirty ratio above min.cleanable.dirty.ratio, or max.compaction.lag.ms
// passed), dirtiest first, and returns how many passes ran. The engine
// runs it in the background (Options.Cleaner); embedders that drive the
// clock (Options.Now) call it themselves.
func (e *Engine) CleanLogs() (int, error) {
	passes := 0
	tried := map[*Partition]bool{}
	for !e.closed.Load() && !e.cleanerStopping.Load() {
		var best *Partition
		bestRatio := -1.0
		for _, p := range *e.parts.Load() {
			if tried[p] || !p.settings.Load().compact || p.deleted.Load() {
				continue
			}
			ratio, _, due := p.log.Dirtiness(e.cleanConfig(p))
			if due && ratio > bestRatio {
				best, bestRatio = p, ratio
			}
		}
		if best == nil {
			return passes, nil
		}
		// A log is cleaned at most once per call: a pass that cannot
		// lower its ratio (a map too small for its keys) must not spin.
		tried[best] = true
		if _, err := best.log.Clean(e.cleanConfig(best)); err != nil {
			if errors.Is(err, partition.ErrCleanAborted) || errors.Is(err, partition.ErrClosed) {
				continue
			}
			return passes, fmt.Errorf("cannot clean %s-%d: %w", best.topic, best.index, err)
		}
		passes++
	}
	return passes, nil
}

// runCleaner is the background cleaner (until Close).
func (e *Engine) runCleaner() {
	defer close(e.cleanerDone)
	backoff := e.opts.Cleaner.Backoff
	if backoff <= 0 {
		backoff = 15 * time.Second
	}
	for {
		n, err := e.CleanLogs()
		if err != nil {
			e.opts.Logger.Warn("log cleaning failed", "error", err)
		}
		wait := backoff
		if n > 0 && err == nil {
			wait = 0 // another log may be due
		}
		select {
		case <-e.stopCleaner:
			return
		case <-time.After(wait):
		}
	}
}

// stopCleaning ends runCleaner and waits for it.
func (e *Engine) stopCleaning() {
	if e.stopCleaner == nil {
		return
	}
	e.cleanerStopping.Store(true)
	e.stopCleanerOnce.Do(func() { close(e.stopCleaner) })
	<-e.cleanerDone
}
