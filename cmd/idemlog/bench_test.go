//go:build linux

package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestBenchUsage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args      []string
		code      int
		stdoutHas string
		stderrHas string
	}{
		{[]string{"bench", "--help"}, 0, "Usage: idemlog bench", ""},
		{[]string{"bench", "-h"}, 0, "--txn-batches N", ""},
		{[]string{"help", "bench"}, 0, "Exit status:", ""},
		{[]string{"--help"}, 0, "  bench ", ""},
		{[]string{"bench", "--producers", "0"}, 2, "", "--producers 0 is not in"},
		{[]string{"bench", "--producers", "x"}, 2, "", "invalid value"},
		{[]string{"bench", "--codec", "brotli"}, 2, "", "--codec"},
		{[]string{"bench", "--fsync", "sometimes"}, 2, "", "cannot parse fsync policy"},
		{[]string{"bench", "--mode", "fast"}, 2, "", "--mode"},
		{[]string{"bench", "--duration", "1s", "--records", "5"}, 2, "", "exclude each other"},
		{[]string{"bench", "--records", "5x"}, 2, "", "invalid value"},
		{[]string{"bench", "--plot", "x.png"}, 2, "", "--plot"},
		{[]string{"bench", "--topic", "a/b"}, 2, "", "--topic"},
		{[]string{"bench", "extra"}, 2, "", `unexpected argument "extra"`},
		{[]string{"bench", "--bogus"}, 2, "", "not defined: --bogus"},
	} {
		code, stdout, stderr := runCLI(c.args...)
		if code != c.code {
			t.Errorf("%q: exit %d, want %d (stderr %q)", c.args, code, c.code, stderr)
		}
		if c.stdoutHas == "" && stdout != "" || !strings.Contains(stdout, c.stdoutHas) {
			t.Errorf("%q: stdout %.300q, want it to contain %q", c.args, stdout, c.stdoutHas)
		}
		if c.stderrHas == "" && stderr != "" || !strings.Contains(stderr, c.stderrHas) {
			t.Errorf("%q: stderr %q, want it to contain %q", c.args, stderr, c.stderrHas)
		}
	}
}

// benchJSON runs bench with --json and returns the decoded report.
func benchJSON(t *testing.T, args ...string) map[string]any {
	t.Helper()
	args = append([]string{"bench", "--json", "--quiet", "--baseline-max", "30ms", "--segment-bytes", "1048576"}, args...)
	code, stdout, stderr := runCLI(args...)
	if code != 0 || stderr != "" {
		t.Fatalf("%q: exit %d, stderr %q", args, code, stderr)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(stdout), &m); err != nil {
		t.Fatalf("%q: %v in %q", args, err, stdout)
	}
	return m
}

func num(t *testing.T, m map[string]any, key string) float64 {
	t.Helper()
	v, ok := m[key].(float64)
	if !ok {
		t.Fatalf("%q is %v (%T), want a number", key, m[key], m[key])
	}
	return v
}

func obj(t *testing.T, m map[string]any, key string) map[string]any {
	t.Helper()
	v, ok := m[key].(map[string]any)
	if !ok {
		t.Fatalf("%q is %v, want an object", key, m[key])
	}
	return v
}

// TestBenchJSON: each mode with each fsync policy finishes with a report
// that has every field, with sane values.
func TestBenchJSON(t *testing.T) {
	flags := []string{"producers", "partitions", "record_size", "batch", "codec", "fsync", "mode", "txn_batches",
		"duration", "records", "readers", "isolation", "dir", "payload", "seed", "json", "plot",
		"cpuprofile", "memprofile", "trace", "segment_bytes", "retention_bytes"}
	for _, mode := range []string{"plain", "idempotent"} {
		for _, fsync := range []string{"never", "always", "interval=20ms", "bytes=65536"} {
			m := benchJSON(t, "--records", "20000", "--mode", mode, "--fsync", fsync, "--producers", "2", "--partitions", "2",
				"--dir", t.TempDir())
			w := obj(t, m, "workload")
			for _, f := range flags {
				if _, ok := w[f]; !ok {
					t.Errorf("%s/%s: workload lacks %q", mode, fsync, f)
				}
			}
			if w["mode"] != mode || w["fsync"] != fsync || w["records"] != 20000.0 || w["json"] != true {
				t.Errorf("%s/%s: workload %v", mode, fsync, w)
			}
			if num(t, m, "records") != 20000 {
				t.Errorf("%s/%s: records %v", mode, fsync, m["records"])
			}
			for _, k := range []string{"bytes", "seconds", "records_per_sec", "bytes_per_sec", "ratio_to_baseline"} {
				if num(t, m, k) <= 0 {
					t.Errorf("%s/%s: %s = %v", mode, fsync, k, m[k])
				}
			}
			if a := num(t, m, "allocs_per_batch"); a < 0 || a > 50 {
				t.Errorf("%s/%s: allocs_per_batch %v", mode, fsync, a)
			}
			num(t, m, "read_records_per_sec")
			num(t, m, "read_bytes_per_sec")
			lat := obj(t, m, "latency_us")
			prev := 0.0
			for _, k := range []string{"p50", "p90", "p99", "p999", "max"} {
				v := num(t, lat, k)
				if v <= 0 || v < prev {
					t.Errorf("%s/%s: latency %v", mode, fsync, lat)
				}
				prev = v
			}
			bl := obj(t, m, "baseline")
			if num(t, bl, "write_bytes_per_sec") <= 0 || num(t, bl, "write_fdatasync_bytes_per_sec") <= 0 || bl["when"] != "interleaved" {
				t.Errorf("%s/%s: baseline %v", mode, fsync, bl)
			}
			sp := obj(t, m, "ratio_spread")
			if num(t, sp, "slices") < 1 || num(t, sp, "pooled") != num(t, m, "ratio_to_baseline") ||
				!(num(t, sp, "min") <= num(t, sp, "median") && num(t, sp, "median") <= num(t, sp, "max")) {
				t.Errorf("%s/%s: ratio spread %v, ratio %v", mode, fsync, sp, m["ratio_to_baseline"])
			}
			if num(t, m, "cpu_ns_per_record") <= 0 || num(t, m, "syncs") < 0 || num(t, m, "device_written_bytes") < -1 ||
				(fsync == "always" && num(t, m, "syncs") <= 0) {
				t.Errorf("%s/%s: cpu_ns_per_record %v, syncs %v, device_written_bytes %v", mode, fsync, m["cpu_ns_per_record"], m["syncs"], m["device_written_bytes"])
			}
			want := "write"
			if fsync == "always" || strings.HasPrefix(fsync, "bytes=") {
				want = "write_fdatasync"
			}
			if bl["compared_with"] != want {
				t.Errorf("%s/%s: compared with %v", mode, fsync, bl["compared_with"])
			}
			if _, ok := bl["write_fdatasync_unwritten_bytes_per_sec"]; ok != (fsync == "always") {
				t.Errorf("%s/%s: write_fdatasync_unwritten_bytes_per_sec present %v, want only under always", mode, fsync, ok)
			} else if ok && num(t, bl, "write_fdatasync_unwritten_bytes_per_sec") <= 0 {
				t.Errorf("%s/%s: baseline %v", mode, fsync, bl)
			}
			if src := bl["sync_group_source"]; fsync == "never" && src != "producers" || fsync == "always" && src != "observed" {
				t.Errorf("%s/%s: sync group source %v", mode, fsync, src)
			}
		}
	}
}

// TestBenchDir: --dir keeps data that verify accepts; a second run with
// readers appends to it and its readers read everything from offset 0.
func TestBenchDir(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	first := benchJSON(t, "--records", "5000", "--dir", dir, "--mode", "plain")
	second := benchJSON(t, "--records", "3000", "--dir", dir, "--readers", "2")
	if first["reopened"] != false || second["reopened"] != true || second["dir_removed"] != false {
		t.Errorf("reopened %v then %v", first["reopened"], second["reopened"])
	}
	for i, po := range second["partition_offsets"].([]any) {
		start := po.(map[string]any)["start_offset"]
		if end := first["partition_offsets"].([]any)[i].(map[string]any)["end_offset"]; start != end {
			t.Errorf("partition %d: second run starts at %v, first ended at %v", i, start, end)
		}
	}
	if got := num(t, second, "read_records"); got != 8000 {
		t.Errorf("readers read %v records, want 8000", got)
	}
	if num(t, second, "read_records_per_sec") <= 0 || num(t, second, "read_bytes_per_sec") <= 0 {
		t.Errorf("read rates %v %v", second["read_records_per_sec"], second["read_bytes_per_sec"])
	}
	code, stdout, stderr := runCLI("verify", dir)
	if code != 0 || !strings.Contains(stdout, "8000 records") {
		t.Errorf("verify: exit %d\n%s%s", code, stdout, stderr)
	}
}

func TestBenchSummary(t *testing.T) {
	code, stdout, stderr := runCLI("bench", "--records", "2000", "--quiet", "--baseline-max", "30ms", "--dir", t.TempDir())
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{"idemlog bench: idempotent", "written        2,000 records", "latency        p50", "ratio"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, stdout)
		}
	}
}

// TestBenchRetention: --retention-bytes reaches the run (segments deleted
// and, under always, reused) and the JSON workload.
func TestBenchRetention(t *testing.T) {
	m := benchJSON(t, "--records", "16000", "--record-size", "1000", "--batch", "80", "--producers", "1", "--partitions", "1",
		"--fsync", "always", "--retention-bytes", "1048576")
	if w := obj(t, m, "workload"); w["retention_bytes"] != 1048576.0 {
		t.Errorf("workload %v", w)
	}
	if num(t, m, "segments_deleted") == 0 || num(t, m, "segments_recycled") == 0 {
		t.Errorf("segments deleted %v, recycled %v", m["segments_deleted"], m["segments_recycled"])
	}
	if code, _, stderr := runCLI("bench", "--retention-bytes", "-1"); code != 2 || !strings.Contains(stderr, "retention-bytes") {
		t.Errorf("--retention-bytes -1: exit %d, stderr %q", code, stderr)
	}
}

// Flag values that the run would ignore or misread are usage errors that
// say which values the flag takes.
func TestBenchFlagValues(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		// A bad level is named before whether it applies.
		{[]string{"--isolation", "foo"}, `--isolation "foo": want read_uncommitted or read_committed`},
		{[]string{"--isolation", "foo", "--readers", "1"}, `--isolation "foo": want read_uncommitted or read_committed`},
		// 0 was taken as "the default" without a word.
		{[]string{"--segment-bytes", "0"}, "--segment-bytes 0 is no size"},
		{[]string{"--slice", "-1ms"}, "--slice -1ms: want 0"},
		{[]string{"--slice", "10us"}, "--slice 10µs: want 0"},
	} {
		all := append([]string{"bench", "--records", "100", "--quiet", "--dir", t.TempDir()}, c.args...)
		code, stdout, stderr := runCLI(all...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, c.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", c.args, code, stderr, c.want)
		}
	}
}

// The default run is bounded in bytes (retention), says so, and says
// where its data goes; with readers, which start at offset 0, retention
// is off unless asked for; batches larger than the default segment get a
// segment that holds two.
func TestBenchBoundedByDefault(t *testing.T) {
	dir := t.TempDir()
	code, stdout, stderr := runCLI("bench", "--records", "2000", "--json", "--dir", dir)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if !strings.HasPrefix(stderr, "bench: data in "+dir+" (kept); retention keeps at most 671.1 MB of segments on disk\n") {
		t.Errorf("stderr does not start with where the data goes and how much stays: %q", stderr)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(stdout), &m); err != nil {
		t.Fatal(err)
	}
	w := obj(t, m, "workload")
	if w["retention_bytes"] != float64(128<<20) || w["segment_bytes"] != float64(32<<20) || num(t, m, "disk_bound_bytes") != 4*(128+32)<<20 {
		t.Errorf("workload %v, disk_bound_bytes %v", w, m["disk_bound_bytes"])
	}
	m = benchJSON(t, "--records", "2000", "--readers", "1", "--dir", t.TempDir())
	if w := obj(t, m, "workload"); w["retention_bytes"] != 0.0 || num(t, m, "disk_bound_bytes") != 0 {
		t.Errorf("with readers: workload %v", w)
	}
	code, stdout, stderr = runCLI("bench", "--json", "--quiet", "--records", "8", "--batch", "4", "--record-size", "8388608",
		"--producers", "1", "--partitions", "1", "--baseline-max", "0", "--dir", t.TempDir())
	if code != 0 {
		t.Fatalf("32 MiB batches: exit %d, stderr %q", code, stderr)
	}
	if err := json.Unmarshal([]byte(stdout), &m); err != nil {
		t.Fatal(err)
	}
	if w := obj(t, m, "workload"); w["segment_bytes"].(float64) < 2*4*(8388608+8) || w["retention_bytes"].(float64) < 4*w["segment_bytes"].(float64) {
		t.Errorf("32 MiB batches: workload %v", w)
	}
}

// TestBenchZeroEnd: an explicit --records 0 or --duration 0 is not a
// run length; it must be rejected (exit 2), not turned into the 10 s default.
func TestBenchZeroEnd(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"bench", "--records", "0", "--quiet", "--baseline-max", "0", "--producers", "1", "--partitions", "1", "--dir", t.TempDir()},
		{"bench", "--duration", "0", "--quiet", "--baseline-max", "0", "--producers", "1", "--partitions", "1", "--dir", t.TempDir()},
	} {
		start := time.Now()
		code, stdout, stderr := runCLI(args...)
		if code != 2 {
			t.Errorf("%q: exit %d after %v, want 2 (stderr %q)\n%s", args, code, time.Since(start).Round(time.Millisecond), stderr, stdout)
		}
	}
}

// TestBenchIgnoredFlags: flags that only mean something in another
// mode are silently accepted and echoed in the workload as if they applied.
func TestBenchIgnoredFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--mode", "idempotent", "--txn-batches", "5"},
		{"--mode", "plain", "--txn-batches", "5"},
		{"--isolation", "read_committed"}, // no --readers
	} {
		all := append([]string{"bench", "--records", "100", "--quiet", "--baseline-max", "0", "--dir", t.TempDir()}, args...)
		code, _, stderr := runCLI(all...)
		if code != 2 {
			t.Errorf("%q: exit %d, want 2: the flag has no effect in this workload (stderr %q)", args, code, stderr)
		} else if !strings.Contains(stderr, strings.TrimPrefix(args[len(args)-2], "--")) {
			t.Errorf("%q: stderr %q", args, stderr)
		}
	}
}

// TestBenchPlotPathChecked: output files are created before the run
// "so that a bad path fails before the run", but --plot is opened only
// after the whole run (and the baseline), which is then lost, exit 1.
func TestBenchPlotPathChecked(t *testing.T) {
	start := time.Now()
	code, stdout, stderr := runCLI("bench", "--duration", "1s", "--quiet", "--baseline-max", "0", "--plot", "/nonexistent/dir/x.svg", "--dir", t.TempDir())
	if code != 2 || time.Since(start) > 500*time.Millisecond {
		t.Errorf("--plot into a missing dir: exit %d after %v, want 2 before the run (stderr %q)\n%s", code, time.Since(start).Round(time.Millisecond), stderr, stdout)
	}
}
