package main

import (
	"log/slog"
	"strings"
	"testing"
)

func TestParseLogLevel(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "WARN": slog.LevelWarn, "Error": slog.LevelError} {
		if got, err := parseLogLevel(s); err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"loud", "", "info+2", "warning"} {
		if _, err := parseLogLevel(s); err == nil || !strings.Contains(err.Error(), "want debug, info, warn or error") {
			t.Errorf("%q: %v", s, err)
		}
	}
}

// serve --log-level loud is a usage error that names the flag and the
// levels, not slog's internal message, and opens nothing.
func TestServeLogLevelChecked(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runCLI("serve", "--log-level", "loud", "--dir", t.TempDir(), "--listen", "127.0.0.1:0")
	if code != 2 || stdout != "" || !strings.Contains(stderr, `idemlog serve: --log-level "loud": want debug, info, warn or error`) ||
		strings.Contains(stderr, "slog:") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}
