package partition

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// SyncKind is when appended bytes are made durable.
type SyncKind int

const (
	// SyncNever leaves flushing to the OS (and to roll and Close). An
	// acknowledgement promises the bytes are in the page cache: they survive
	// a process crash, not a machine crash.
	SyncNever SyncKind = iota
	// SyncAlways acknowledges an append only once its bytes are on disk.
	// Concurrent appenders share one fdatasync (group commit).
	SyncAlways
	// SyncInterval syncs in the background every Interval. A machine crash
	// loses at most the last Interval of acknowledged appends.
	SyncInterval
	// SyncBytes syncs whenever Bytes have been appended since the last sync;
	// the appender that crosses the mark waits for that sync. A machine
	// crash loses less than Bytes (plus what was appended concurrently).
	SyncBytes
)

// SyncPolicy is a partition's fsync policy.
type SyncPolicy struct {
	Kind     SyncKind
	Interval time.Duration
	Bytes    int64
}

// ParseSyncPolicy parses "never", "always", "interval=DUR" or "bytes=N".
func ParseSyncPolicy(s string) (SyncPolicy, error) {
	switch {
	case s == "never":
		return SyncPolicy{Kind: SyncNever}, nil
	case s == "always":
		return SyncPolicy{Kind: SyncAlways}, nil
	case strings.HasPrefix(s, "interval="):
		d, err := time.ParseDuration(strings.TrimPrefix(s, "interval="))
		if err != nil || d <= 0 {
			return SyncPolicy{}, fmt.Errorf("cannot parse fsync policy %q: want interval=DURATION > 0", s)
		}
		return SyncPolicy{Kind: SyncInterval, Interval: d}, nil
	case strings.HasPrefix(s, "bytes="):
		n, err := strconv.ParseInt(strings.TrimPrefix(s, "bytes="), 10, 64)
		if err != nil || n <= 0 {
			return SyncPolicy{}, fmt.Errorf("cannot parse fsync policy %q: want bytes=N > 0", s)
		}
		return SyncPolicy{Kind: SyncBytes, Bytes: n}, nil
	}
	return SyncPolicy{}, fmt.Errorf("cannot parse fsync policy %q: want never, always, interval=DUR or bytes=N", s)
}

func (p SyncPolicy) String() string {
	switch p.Kind {
	case SyncAlways:
		return "always"
	case SyncInterval:
		return "interval=" + p.Interval.String()
	case SyncBytes:
		return "bytes=" + strconv.FormatInt(p.Bytes, 10)
	}
	return "never"
}

// FlushPolicy is what a topic's flush.messages and flush.ms ask for
// (Kafka's log.flush.interval.messages and log.flush.interval.ms): sync
// points added to the log's own policy (Options.Sync), never taken from
// it, so that a topic config cannot weaken the promise the log was opened
// with. The zero value adds nothing.
type FlushPolicy struct {
	// Messages: an append that leaves Messages offsets or more above the
	// recovery point (the durable end) waits for a sync before it is
	// acknowledged, as Kafka's append flushes once unflushed messages
	// (log end offset - recovery point) reach flush.messages. 1 makes every
	// append wait: SyncAlways, with its group commit. 0: none.
	Messages int64
	// Interval: a sync every Interval, as SyncInterval. When the log's own
	// policy is an interval too, the shorter one runs. 0: none.
	Interval time.Duration
}

func (f FlushPolicy) String() string {
	return fmt.Sprintf("messages=%d interval=%v", f.Messages, f.Interval)
}

// syncPlan is the sync triggers in force: Options.Sync with the
// FlushPolicy (Options.Flush, SetFlush) added. It is immutable and
// replaced whole, so that the lock-free readers (MustWait, syncOnce, the
// flusher) see one policy or the other, never a mix.
type syncPlan struct {
	// always: every append waits for a sync (group commit with staging).
	always bool
	// interval is the flusher's period; 0: no periodic sync.
	interval time.Duration
	// bytes: the append that takes the bytes appended since the last such
	// wait to this many waits (SyncBytes). 0: none.
	bytes int64
	// messages: an append that leaves this many offsets above the
	// recovery point waits (FlushPolicy.Messages above 1). 0: none.
	messages int64
}

// planOf combines the log's policy and a topic's flush policy: every
// trigger of either applies.
func planOf(base SyncPolicy, f FlushPolicy) *syncPlan {
	p := &syncPlan{always: base.Kind == SyncAlways || f.Messages == 1}
	if base.Kind == SyncInterval {
		p.interval = base.Interval
	}
	if f.Interval > 0 && (p.interval == 0 || f.Interval < p.interval) {
		p.interval = f.Interval
	}
	if base.Kind == SyncBytes {
		p.bytes = base.Bytes
	}
	if f.Messages > 1 {
		p.messages = f.Messages
	}
	if p.always {
		// Every append is synced before its acknowledgement: the other
		// triggers would only add syncs of nothing.
		p.interval, p.bytes, p.messages = 0, 0, 0
	}
	return p
}
