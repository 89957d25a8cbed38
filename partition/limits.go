package partition

import (
	"fmt"
	"time"
)

// Limits are the options a topic's config may change while the log is
// open. Each applies at its next use, as Kafka applies a topic config
// change: RollAge and SegmentBytes at the next append's roll check,
// RetentionAge and RetentionBytes at the next ApplyRetention. Zero values
// mean what they mean in Options.
type Limits struct {
	RollAge        time.Duration
	SegmentBytes   int64 // roll once a segment would pass it; segments keep the size they were made with
	RetentionAge   time.Duration
	RetentionBytes int64
}

// SetLimits replaces the log's limits. The fields it changes are read
// only under mu, so an append or a retention pass sees either the old
// limits or the new, never a mix.
func (l *Log) SetLimits(lim Limits) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if lim.RollAge == 0 {
		lim.RollAge = 7 * 24 * time.Hour
	}
	if lim.RetentionAge == 0 {
		lim.RetentionAge = 7 * 24 * time.Hour
	}
	l.opts.RollAge = lim.RollAge
	l.opts.RetentionAge = lim.RetentionAge
	l.opts.RetentionBytes = lim.RetentionBytes
	l.rollBytes = lim.SegmentBytes
}

// SetFlush replaces the log's flush policy (a topic's flush.messages and
// flush.ms) while it is open: from the next append, appends wait for the
// syncs it adds to the log's own policy (Options.Sync), and the flusher
// follows its interval within one tick. A policy that adds nothing leaves
// the log's own. A negative count or interval is refused and changes
// nothing.
//
// Lock-free readers (MustWait, the syncer's choice of staging, the
// flusher) load the plan atomically; the append path reads it under mu,
// which this holds while storing it, so each append applies one plan.
func (l *Log) SetFlush(f FlushPolicy) error {
	if err := f.check(); err != nil {
		return fmt.Errorf("cannot set flush policy: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.opts.Flush = f
	l.plan.Store(planOf(l.opts.Sync, f))
	l.startFlusherLocked()
	return nil
}

// FlushPolicy returns the log's flush policy.
func (l *Log) FlushPolicy() FlushPolicy {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.opts.Flush
}

// check refuses a negative count or interval.
func (f FlushPolicy) check() error {
	if f.Messages < 0 || f.Interval < 0 {
		return fmt.Errorf("flush policy %v: %w", f, ErrInvalidSyncPolicy)
	}
	return nil
}
