package partition

import "time"

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
