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
