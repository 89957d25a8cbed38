//go:build linux && (invariants || race)

package mmap

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"testing"
)

const useAfterUnmapEnv = "MMAP_TEST_USE_AFTER_UNMAP"

var sink byte

// TestUseAfterUnmapFaults checks that in invariants builds a stale slice
// faults instead of reading memory. The access crashes the process, so it
// runs in a child: the test binary re-executed with useAfterUnmapEnv set.
func TestUseAfterUnmapFaults(t *testing.T) {
	if mode := os.Getenv(useAfterUnmapEnv); mode != "" {
		useAfterUnmap(t, mode)
		return // The access did not fault; the parent sees a clean exit.
	}
	for _, mode := range []string{"read", "write"} {
		t.Run(mode, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestUseAfterUnmapFaults$", "-test.count=1")
			cmd.Env = append(os.Environ(), useAfterUnmapEnv+"="+mode)
			out, err := cmd.CombinedOutput()
			var exitErr *exec.ExitError
			if !errors.As(err, &exitErr) {
				t.Fatalf("child survived a %s after Unmap (err=%v); output:\n%s", mode, err, out)
			}
			if !bytes.Contains(out, []byte("fault")) {
				t.Fatalf("child failed without a fault (%v); output:\n%s", err, out)
			}
		})
	}
}

func useAfterUnmap(t *testing.T, mode string) {
	f, err := os.CreateTemp("", "mmap-use-after-unmap")
	if err != nil {
		t.Fatal(err)
	}
	// Removed at once because the crash skips all cleanup; the mapping
	// keeps the inode alive until Unmap.
	os.Remove(f.Name())
	if err := Fallocate(f, 0, 4096); err != nil {
		t.Fatal(err)
	}
	m := mustMap(t, f, 0, 4096, true)
	f.Close()
	stale := m.Bytes()
	stale[0] = 42
	if err := m.Unmap(); err != nil {
		t.Fatal(err)
	}
	if mode == "read" {
		sink = stale[0]
	} else {
		stale[0] = 43
	}
}
