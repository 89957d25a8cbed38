package partition

import "time"

// abandon stops l's background work without doing any of it and without
// touching its files, leaving them as a process crash at this point would.
// The log must not be used afterwards.
func (l *Log) abandon() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.maint.drop.Store(true)
	close(l.stop)
	l.flusher.Wait()
	close(l.maint.tasks)
	l.bg.Wait()
}

func waitBriefly() { time.Sleep(time.Millisecond) }
