package main

import (
	"runtime/debug"
	"strings"
	"testing"
)

// --version gives the module's version and, where the build recorded
// them, the commit, its time and whether the tree had changes.
func TestVersionString(t *testing.T) {
	t.Parallel()
	info := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/idemlog/idemlog", Version: "v0.9.1"},
		Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "0123abcd"},
			{Key: "vcs.time", Value: "2026-12-01T10:00:00Z"}, {Key: "vcs.modified", Value: "true"},
			{Key: "GOOS", Value: "linux"}, {Key: "GOARCH", Value: "amd64"}}}
	want := "idemlog v0.9.1 (github.com/idemlog/idemlog)\ngit commit 0123abcd, 2026-12-01T10:00:00Z, with uncommitted changes\nbuilt with go1.26.0 for linux/amd64\n"
	if got := versionString(info, true); got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
	// No VCS information (go install from the module proxy, or a build
	// outside a checkout): the version and the toolchain only.
	info.Settings = nil
	info.Main.Version = "(devel)"
	if got := versionString(info, true); got != "idemlog (devel) (github.com/idemlog/idemlog)\nbuilt with go1.26.0\n" {
		t.Errorf("without VCS: %q", got)
	}
	if got := versionString(nil, false); !strings.Contains(got, "no build information") {
		t.Errorf("without build information: %q", got)
	}
}
