package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var (
	sample     = filepath.Join("..", "..", "testdata", "sample.log")
	goldenJSON = filepath.Join("..", "..", "testdata", "sample.dump.json")
)

func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestUsage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args       []string
		code       int
		stdoutHas  string // "" means stdout must be empty
		stderrHas  string // "" means stderr must be empty
		stderrNote string
	}{
		{args: []string{"--help"}, code: 0, stdoutHas: "Commands:\n  dump"},
		{args: []string{"-h"}, code: 0, stdoutHas: "Commands:\n  dump"},
		{args: []string{"help"}, code: 0, stdoutHas: "Commands:\n  dump"},
		{args: []string{"--help"}, code: 0, stdoutHas: "structured lines (log/slog's key=value text"},
		{args: []string{"help", "dump"}, code: 0, stdoutHas: "Usage: idemlog dump"},
		{args: []string{"dump", "--help"}, code: 0, stdoutHas: "Exit status:"},
		{args: []string{"dump", "-h"}, code: 0, stdoutHas: "--no-records"},
		{args: []string{"dump", sample, "--help"}, code: 0, stdoutHas: "Usage: idemlog dump"},
		{args: nil, code: 2, stderrHas: "missing command"},
		{args: []string{"nope"}, code: 2, stderrHas: `unknown command "nope"`},
		{args: []string{"--bogus"}, code: 2, stderrHas: "unknown flag --bogus"},
		{args: []string{"dump"}, code: 2, stderrHas: "missing FILE"},
		{args: []string{"dump", "--json"}, code: 2, stderrHas: "missing FILE"},
		{args: []string{"dump", "--bogus", sample}, code: 2, stderrHas: "not defined: --bogus"},
		{args: []string{"dump", sample, "--bogus"}, code: 2, stderrHas: "not defined: --bogus"},
		{args: []string{"dump", "-bogus", sample}, code: 2, stderrHas: "not defined: --bogus"},
		{args: []string{"bench", "--nope"}, code: 2, stderrHas: "idemlog bench: flag provided but not defined: --nope\n"},
		{args: []string{"bench", "--producers"}, code: 2, stderrHas: "flag needs an argument: --producers\n"},
		{args: []string{"bench", "--duration", "x"}, code: 2, stderrHas: `invalid value "x" for flag --duration: `},
		{args: []string{"bench", "--json=x"}, code: 2, stderrHas: `invalid boolean value "x" for --json: `},
		{args: []string{"--version"}, code: 0, stdoutHas: "idemlog "},
		{args: []string{"dump", "--max-batch-bytes", "10", sample}, code: 2, stderrHas: "below the 61-byte"},
		{args: []string{"dump", "--max-inflate-bytes", "x", sample}, code: 2, stderrHas: "invalid value"},
	} {
		code, stdout, stderr := runCLI(c.args...)
		if code != c.code {
			t.Errorf("%q: exit %d, want %d (stderr %q)", c.args, code, c.code, stderr)
		}
		if c.stdoutHas == "" && stdout != "" || !strings.Contains(stdout, c.stdoutHas) {
			t.Errorf("%q: stdout %q, want it to contain %q", c.args, stdout, c.stdoutHas)
		}
		if c.stderrHas == "" && stderr != "" || !strings.Contains(stderr, c.stderrHas) {
			t.Errorf("%q: stderr %q, want it to contain %q", c.args, stderr, c.stderrHas)
		}
		if c.code == 2 && !strings.Contains(stderr, "Usage: idemlog") {
			t.Errorf("%q: no usage on stderr: %q", c.args, stderr)
		}
	}
}

func TestDumpSample(t *testing.T) {
	t.Parallel()
	want, err := os.ReadFile(goldenJSON)
	if err != nil {
		t.Fatal(err)
	}
	// Flags before and after the file both work.
	for _, args := range [][]string{{"dump", "--json", sample}, {"dump", sample, "--json"}, {"dump", "-json", sample}} {
		code, stdout, stderr := runCLI(args...)
		if code != 0 || stderr != "" {
			t.Fatalf("%q: exit %d, stderr %q", args, code, stderr)
		}
		if stdout != string(want) {
			t.Fatalf("%q: output differs from %s", args, goldenJSON)
		}
	}
	code, stdout, stderr := runCLI("dump", sample)
	if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "Dumping "+sample+"\n") ||
		!strings.Contains(stdout, "endTxnMarker: COMMIT coordinatorEpoch: 3") ||
		!strings.HasSuffix(stdout, "Summary: 10 batches, 31 records, 1478 bytes, 0 corrupt\n") {
		t.Fatalf("text dump: exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
	}
	code, stdout, _ = runCLI("dump", "--no-records", sample)
	if code != 0 || strings.Contains(stdout, "| offset") {
		t.Fatalf("--no-records: exit %d, stdout:\n%s", code, stdout)
	}
}

func tornSample(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(sample)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "torn.log")
	if err := os.WriteFile(path, data[:len(data)-10], 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestDumpTruncated(t *testing.T) {
	t.Parallel()
	torn := tornSample(t)
	// The last batch of the sample starts at 1363.
	const at = "position 1363"
	code, stdout, stderr := runCLI("dump", "--json", torn)
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if strings.Count(stdout, "\n") != 9 {
		t.Errorf("want the 9 whole batches on stdout, got:\n%s", stdout)
	}
	if !strings.Contains(stderr, torn) || !strings.Contains(stderr, at) || !strings.Contains(stderr, "truncated") {
		t.Errorf("stderr %q does not name the file, %s and the cause", stderr, at)
	}
	code, stdout, stderr = runCLI("dump", torn)
	if code != 1 || !strings.Contains(stdout, "stopped at "+at) || !strings.Contains(stderr, at) {
		t.Errorf("text: exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
	}
	// A bad file does not keep the others from being dumped.
	code, stdout, _ = runCLI("dump", torn, sample)
	if code != 1 || strings.Count(stdout, "Dumping ") != 2 || !strings.Contains(stdout, "Summary: 10 batches") {
		t.Errorf("two files: exit %d, stdout:\n%s", code, stdout)
	}
	// After "--" a flag-like argument is a file name.
	code, _, stderr = runCLI("dump", "--", "--json")
	if code != 1 || !strings.Contains(stderr, "cannot open segment") {
		t.Errorf("dump -- --json: exit %d, stderr %q", code, stderr)
	}
}

// TestBinary checks the exit statuses of the real binary, which the
// in-process tests cannot: main's wiring to os.Exit.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool in PATH")
	}
	bin := filepath.Join(t.TempDir(), "idemlog")
	if out, err := exec.Command(goTool, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	torn := tornSample(t)
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"--help"}, 0},
		{[]string{"dump", "--help"}, 0},
		{nil, 2},
		{[]string{"dump"}, 2},
		{[]string{"dump", "--bogus", sample}, 2},
		{[]string{"bogus"}, 2},
		{[]string{"dump", sample}, 0},
		{[]string{"dump", "--json", sample}, 0},
		{[]string{"dump", torn}, 1},
		{[]string{"dump", "--json", torn}, 1},
	} {
		err := exec.Command(bin, c.args...).Run()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != c.code {
			t.Errorf("idemlog %q: exit %d, want %d", c.args, code, c.code)
		}
	}
}
