package kafka

import (
	"context"
	"log/slog"
	"sync"
	"syscall"
	"time"
)

// defaultMaxConnections is max.connections when Options leave it 0: half
// of the process's open-file limit, so that clients alone can never take
// the descriptors the engine needs for its segments and indexes.
func defaultMaxConnections() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == 0 {
		return 1 << 20
	}
	return int(max(32, min(rl.Cur/2, 1<<30)))
}

// acceptDelay is the wait before the next Accept after an Accept error:
// 5 ms doubling up to 1 s, as net/http does. An error such as EMFILE lasts
// until descriptors come back; retrying at once would spin, and giving up
// would take the server down for every other client.
func acceptDelay(prev time.Duration) time.Duration {
	const first, most = 5 * time.Millisecond, time.Second
	if prev == 0 {
		return first
	}
	return min(2*prev, most)
}

// logLimiter lets one line through per interval and counts those it holds
// back, reported with the next line that goes through: a flood of one
// failure (an accept error per connection attempt, a storage error per
// request) cannot fill the log, yet its first occurrence and its rate stay
// visible.
type logLimiter struct {
	every time.Duration
	mu    sync.Mutex
	next  time.Time
	held  int
}

// logLimitInterval is how often one kind of repeated failure is logged.
const logLimitInterval = 10 * time.Second

func (l *logLimiter) log(log *slog.Logger, level slog.Level, msg string, args ...any) {
	l.mu.Lock()
	now := time.Now()
	if now.Before(l.next) {
		l.held++
		l.mu.Unlock()
		return
	}
	every := l.every
	if every == 0 {
		every = logLimitInterval
	}
	l.next = now.Add(every)
	held := l.held
	l.held = 0
	l.mu.Unlock()
	if held > 0 {
		args = append(args, "suppressed", held)
	}
	log.Log(context.Background(), level, msg, args...)
}
