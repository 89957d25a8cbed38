package main

import (
	"fmt"
	"log/slog"
	"strings"
)

// parseLogLevel reads serve's --log-level: one of the four names, in any
// case. slog's own parser also takes offsets ("info+2") and answers a
// bad name with its internal message ("slog: level string ...: unknown
// name"), which says neither the flag nor the names it takes.
func parseLogLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("--log-level %q: want debug, info, warn or error", s)
}
