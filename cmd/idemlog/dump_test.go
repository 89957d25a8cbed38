package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemlog/idemlog/batch"
)

// TestDumpErrorNamesFile: with --json the output has no file names,
// so stderr is where one learns which FILE is bad. A segment with a corrupt
// batch and a torn tail fails with an error wrapping both (two %w), which
// runDump takes for a directory's joined errors and splits: neither line
// says which file it is about.
func TestDumpErrorNamesFile(t *testing.T) {
	t.Parallel()
	b := batch.NewBuilder(batch.CodecNone)
	b.Append(1, []byte("k"), []byte("value"), nil)
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	one := append([]byte(nil), out...)
	bad := append([]byte(nil), one...)
	bad[len(bad)-3] ^= 1 // in the value: the CRC no longer matches
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.log")
	data := append(append(append([]byte(nil), bad...), one...), 0, 0, 0) // then a torn tail
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good.log")
	if err := os.WriteFile(good, one, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI("dump", "--json", good, path)
	if code != exitFail {
		t.Fatalf("exit %d, want %d\n%s", code, exitFail, stderr)
	}
	for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if !strings.Contains(line, path) {
			t.Errorf("stderr line does not name the bad file %s: %q", path, line)
		}
	}
	if t.Failed() {
		t.Logf("stderr:\n%s", stderr)
	}
}
