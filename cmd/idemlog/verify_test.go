//go:build linux

package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/index"
	"github.com/idemlog/idemlog/internal/testutil"
	"github.com/idemlog/idemlog/logdump"
	"github.com/idemlog/idemlog/partition"
	"github.com/idemlog/idemlog/segment"
)

const (
	testBatches = 60
	testRecords = 4 // per batch
)

// testPartition is a partition written by the engine and closed cleanly.
type testPartition struct {
	data, dir string
	segs      []string // .log paths in base order
	bases     []int64
}

// buildPartition writes testBatches batches through partition.Log with
// segments small enough to roll several times and an index interval small
// enough to give every segment index entries.
func buildPartition(t *testing.T) testPartition {
	t.Helper()
	data := t.TempDir()
	dir := filepath.Join(data, "orders-0")
	l, err := partition.Open(dir, partition.Options{Segment: segment.Options{MaxBytes: 4096, IndexIntervalBytes: 256, IndexMaxBytes: 4096}})
	if err != nil {
		t.Fatal(err)
	}
	b := batch.NewBuilder(batch.CodecNone)
	for i := range testBatches {
		b.Reset(batch.CodecNone)
		for j := range testRecords {
			b.Append(1700000000000+int64(i*1000+j), fmt.Appendf(nil, "k%d", i), bytes.Repeat([]byte{byte('a' + i%26)}, 40), nil)
		}
		out, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(out); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	p := testPartition{data: data, dir: dir}
	p.segs, _ = filepath.Glob(filepath.Join(dir, "*.log"))
	if len(p.segs) < 4 {
		t.Fatalf("want at least 4 segments, got %q", p.segs)
	}
	for _, s := range p.segs {
		base, ok := segment.ParseName(filepath.Base(s), ".log")
		if !ok {
			t.Fatalf("unexpected file %s", s)
		}
		p.bases = append(p.bases, base)
	}
	return p
}

// mid is the index of a segment with segments on both sides.
const mid = 1

func (p testPartition) file(i int, suffix string) string {
	return filepath.Join(p.dir, segment.FileName(p.bases[i], suffix))
}

// batchStarts returns the position of every batch in a .log file.
func batchStarts(t *testing.T, path string) []int64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var starts []int64
	it := batch.NewIter(data)
	for it.Next() {
		starts = append(starts, int64(it.Pos()))
	}
	if err := it.Err(); err != nil {
		t.Fatalf("%s at %d: %v", path, it.End(), err)
	}
	return starts
}

func modify(t *testing.T, path string, f func([]byte) []byte) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, f(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func wantExit(t *testing.T, want int, args ...string) (stdout, stderr string) {
	t.Helper()
	code, stdout, stderr := runCLI(args...)
	if code != want {
		t.Fatalf("%q: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", args, code, want, stdout, stderr)
	}
	return stdout, stderr
}

func TestVerifyUsage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		code int
		has  string
	}{
		{[]string{"help", "verify"}, 0, "Usage: idemlog verify"},
		{[]string{"verify", "--help"}, 0, "Exit status:"},
		{[]string{"--help"}, 0, "\n  verify "},
		{[]string{"verify"}, 2, "missing PATH"},
		{[]string{"verify", "--bogus", sample}, 2, "not defined: --bogus"},
		{[]string{"verify", sample, "--max-batch-bytes", "10"}, 2, "below the 61-byte"},
		{[]string{"verify", "--max-batch-bytes", "x", sample}, 2, "invalid value"},
	} {
		code, stdout, stderr := runCLI(c.args...)
		if code != c.code || !strings.Contains(stdout+stderr, c.has) {
			t.Errorf("%q: exit %d, want %d with %q; stdout %q stderr %q", c.args, code, c.code, c.has, stdout, stderr)
		}
		if code == 2 && !strings.Contains(stderr, "Usage: idemlog verify") {
			t.Errorf("%q: no usage on stderr: %q", c.args, stderr)
		}
	}
}

func TestVerifyClean(t *testing.T) {
	t.Parallel()
	p := buildPartition(t)
	for _, path := range []string{p.data, p.dir} {
		stdout, stderr := wantExit(t, 0, "verify", path)
		if stderr != "" {
			t.Errorf("stderr %q", stderr)
		}
		for _, s := range p.segs {
			if !strings.Contains(stdout, s+": ") {
				t.Errorf("verify %s does not mention %s:\n%s", path, s, stdout)
			}
		}
		total := testBatches * testRecords
		for _, want := range []string{
			fmt.Sprintf("%s: partition of %d segments, %d batches, %d records", p.dir, len(p.segs), testBatches, total),
			fmt.Sprintf("offsets 0..%d, no gaps, closed cleanly\n", total),
			fmt.Sprintf("Summary: 1 partition, %d segments, %d batches", len(p.segs), testBatches),
			": OK\n",
		} {
			if !strings.Contains(stdout, want) {
				t.Errorf("verify %s: no %q in:\n%s", path, want, stdout)
			}
		}
	}
	// Every sealed segment got index entries, and verify checked them.
	stdout, _ := wantExit(t, 0, "verify", p.file(mid, ".log"))
	if strings.Contains(stdout, "index 0 entries") || strings.Contains(stdout, "no index") ||
		!strings.Contains(stdout, fmt.Sprintf("offsets %d..%d", p.bases[1], p.bases[2])) {
		t.Errorf("one segment:\n%s", stdout)
	}
	// An index path stands for its segment.
	if out, _ := wantExit(t, 0, "verify", p.file(mid, ".timeindex")); out != stdout {
		t.Errorf("verify of the .timeindex:\n%s\nwant:\n%s", out, stdout)
	}
}

func TestVerifyCorruptBatch(t *testing.T) {
	t.Parallel()
	p := buildPartition(t)
	good := buildPartition(t)
	path := p.file(mid, ".log")
	starts := batchStarts(t, path)
	at := starts[1]
	modify(t, path, func(b []byte) []byte { b[at+batch.HeaderSize+4] ^= 0x40; return b })
	// The bad PATH stops at its bad file; the good one is still checked.
	stdout, stderr := wantExit(t, 1, "verify", p.data, good.dir)
	want := fmt.Sprintf("%s: batch at position %d", path, at)
	// Once, in the report: stderr is for the command line's own errors.
	if strings.Count(stdout, want) != 1 || !strings.Contains(stdout, "error: "+want) || stderr != "" {
		t.Errorf("want %q once, on stdout; stdout:\n%s\nstderr:\n%s", want, stdout, stderr)
	}
	if strings.Contains(stdout, p.file(mid+1, ".log")) {
		t.Errorf("went on past the bad file:\n%s", stdout)
	}
	if !strings.Contains(stdout, good.dir+": partition of") || !strings.HasSuffix(stdout, ": 1 of 2 paths FAILED\n") {
		t.Errorf("good partition not checked or summary wrong:\n%s", stdout)
	}
	// The library says what went wrong in terms errors.Is knows.
	if _, err := logdump.Verify(&bytes.Buffer{}, p.dir, logdump.VerifyOptions{}); !errors.Is(err, batch.ErrCRC) {
		t.Errorf("Verify: %v, want batch.ErrCRC", err)
	}
}

func TestVerifyTruncated(t *testing.T) {
	t.Parallel()
	p := buildPartition(t)
	path := p.file(mid, ".log")
	starts := batchStarts(t, path)
	modify(t, path, func(b []byte) []byte { return b[:len(b)-10] })
	out, _ := wantExit(t, 1, "verify", p.dir)
	if want := fmt.Sprintf("%s: batch at position %d", path, starts[len(starts)-1]); !strings.Contains(out, want) {
		t.Errorf("stdout %q, want %q", out, want)
	}
}

func TestVerifyCorruptIndex(t *testing.T) {
	t.Parallel()
	p := buildPartition(t)
	path := p.file(mid, ".index")
	modify(t, path, func(b []byte) []byte {
		if len(b) < 8 {
			t.Fatalf("%s has no entries", path)
		}
		binary.BigEndian.PutUint32(b[4:], binary.BigEndian.Uint32(b[4:])+1)
		return b
	})
	out, _ := wantExit(t, 1, "verify", p.data)
	if !strings.Contains(out, path+": entry 0 points at position") || !strings.Contains(out, "not a batch start") {
		t.Errorf("stdout %q does not name %s and the entry", out, path)
	}
}

func TestVerifyNoIndexes(t *testing.T) {
	t.Parallel()
	p := buildPartition(t)
	for i := range p.segs {
		if err := os.Remove(p.file(i, ".index")); err != nil {
			t.Fatal(err)
		}
	}
	stdout, _ := wantExit(t, 0, "verify", p.dir)
	if n := strings.Count(stdout, ", no index, timeindex "); n != len(p.segs) {
		t.Errorf("%d segments say no index, want %d:\n%s", n, len(p.segs), stdout)
	}
}

// A bare Kafka segment under a name that is not a base offset takes its
// base from its first batch.
func TestVerifyBareSegment(t *testing.T) {
	t.Parallel()
	p := buildPartition(t)
	bare := filepath.Join(t.TempDir(), "sample.log")
	copyFile(t, p.file(mid, ".log"), bare)
	stdout, _ := wantExit(t, 0, "verify", bare, sample)
	for _, want := range []string{
		fmt.Sprintf("%s: ", bare), fmt.Sprintf("offsets %d..%d, no index, no timeindex", p.bases[1], p.bases[2]),
		sample + ": 10 batches, 31 records, 1478 bytes, offsets 0..31",
		"Summary: 0 partitions, 2 segments",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("no %q in:\n%s", want, stdout)
		}
	}
	// A directory of such files checks each on its own.
	stdout, _ = wantExit(t, 0, "verify", filepath.Dir(bare))
	if !strings.Contains(stdout, "Summary: 0 partitions, 1 segment,") {
		t.Errorf("directory of bare segments:\n%s", stdout)
	}
	// In a partition directory, such a file is no part of the log.
	copyFile(t, sample, filepath.Join(p.dir, "stray.log"))
	stdout, _ = wantExit(t, 0, "verify", p.dir)
	if !strings.Contains(stdout, "note: "+filepath.Join(p.dir, "stray.log")+" is not named") {
		t.Errorf("stray file:\n%s", stdout)
	}
}

func TestVerifyOverlap(t *testing.T) {
	t.Parallel()
	p := buildPartition(t)
	// Named one above the first segment's base, holding the second's
	// batches: sound on its own, but it starts inside the first segment.
	dup := filepath.Join(p.dir, segment.FileName(p.bases[0]+1, ".log"))
	copyFile(t, p.file(1, ".log"), dup)
	if out, _ := wantExit(t, 1, "verify", p.dir); !strings.Contains(out, dup+": base offset") || !strings.Contains(out, "overlaps") {
		t.Errorf("stdout %q", out)
	}
}

func TestVerifyGap(t *testing.T) {
	t.Parallel()
	p := buildPartition(t)
	for _, suffix := range []string{".log", ".index", ".timeindex"} {
		if err := os.Remove(p.file(1, suffix)); err != nil {
			t.Fatal(err)
		}
	}
	// idemlog never compacts: in its partition a gap is lost data.
	stdout, _ := wantExit(t, 1, "verify", p.dir)
	if want := fmt.Sprintf("offsets %d..%d missing before it", p.bases[1], p.bases[2]); !strings.Contains(stdout, want) {
		t.Errorf("no %q in:\n%s", want, stdout)
	}
	// In a Kafka partition (its checkpoints in the log directory above),
	// a gap is what compaction leaves.
	for _, name := range []string{"recovery-point-offset-checkpoint", "log-start-offset-checkpoint"} {
		if err := os.Rename(filepath.Join(p.dir, name), filepath.Join(p.data, name)); err != nil {
			t.Fatal(err)
		}
	}
	stdout, _ = wantExit(t, 0, "verify", p.dir)
	if want := fmt.Sprintf(", %d offsets skipped,", p.bases[2]-p.bases[1]); !strings.Contains(stdout, want) {
		t.Errorf("no %q in:\n%s", want, stdout)
	}
}

func TestVerifyZeroTail(t *testing.T) {
	t.Parallel()
	p := buildPartition(t)
	last := len(p.segs) - 1
	zeros := func(b []byte) []byte { return append(b, make([]byte, 4096)...) }
	modify(t, p.file(last, ".log"), zeros)
	// Closed cleanly: the active segment was trimmed, so zeros are damage.
	if out, _ := wantExit(t, 1, "verify", p.dir); !strings.Contains(out, p.file(last, ".log")+": 4096 zero bytes") {
		t.Errorf("stdout %q", out)
	}
	if err := os.Remove(filepath.Join(p.dir, ".kafka_cleanshutdown")); err != nil {
		t.Fatal(err)
	}
	stdout, _ := wantExit(t, 0, "verify", p.dir)
	if !strings.Contains(stdout, "note: "+p.file(last, ".log")+" ends in 4096 zero bytes") || !strings.Contains(stdout, "not closed cleanly") {
		t.Errorf("stdout:\n%s", stdout)
	}
	// Kafka keeps the marker in the data directory.
	if err := os.WriteFile(filepath.Join(p.data, ".kafka_cleanshutdown"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	wantExit(t, 1, "verify", p.dir)
	if err := os.Remove(filepath.Join(p.data, ".kafka_cleanshutdown")); err != nil {
		t.Fatal(err)
	}
	// A rolled segment that the crash left unsealed ends in zeros too:
	// accepted while its batches reach the next segment's base.
	modify(t, p.file(mid, ".log"), zeros)
	stdout, _ = wantExit(t, 0, "verify", p.dir)
	if !strings.Contains(stdout, "note: "+p.file(mid, ".log")+" ends in 4096 zero bytes") {
		t.Errorf("stdout:\n%s", stdout)
	}
	// Not when they fall short: its last batch is lost, the tail is
	// damage.
	modify(t, p.file(mid, ".log"), func(b []byte) []byte {
		last := 0
		for pos := 0; pos < len(b); {
			n, err := batch.Size(b[pos:])
			if err != nil || allZeroBytes(b[pos:pos+n]) {
				break
			}
			last, pos = pos, pos+n
		}
		clear(b[last:])
		return b
	})
	// (Its indexes would point past the data first: the tail rule is
	// what this checks.)
	for _, suffix := range []string{".index", ".timeindex"} {
		if err := os.Remove(p.file(mid, suffix)); err != nil {
			t.Fatal(err)
		}
	}
	if out, _ := wantExit(t, 1, "verify", p.dir); !strings.Contains(out, p.file(mid, ".log")+": ") || !strings.Contains(out, "zero bytes") {
		t.Errorf("stdout %q", out)
	}
}

func allZeroBytes(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func TestDumpPartition(t *testing.T) {
	t.Parallel()
	p := buildPartition(t)
	stdout, _ := wantExit(t, 0, "dump", "--no-records", p.dir)
	if n := strings.Count(stdout, "Dumping "); n != len(p.segs) {
		t.Errorf("%d files dumped, want %d", n, len(p.segs))
	}
	for i, s := range p.segs {
		hdr := "Dumping " + s + "\nbaseOffset: " + fmt.Sprint(p.bases[i]) + " "
		if i > 0 && strings.Index(stdout, hdr) < strings.Index(stdout, "Dumping "+p.segs[i-1]+"\n") || !strings.Contains(stdout, hdr) {
			t.Errorf("%s missing or out of order", s)
		}
	}
	stdout, _ = wantExit(t, 0, "dump", "--json", p.dir)
	if n := strings.Count(stdout, "\n"); n != testBatches {
		t.Errorf("%d JSON lines, want %d", n, testBatches)
	}
	// A bad segment does not keep the others from being dumped.
	modify(t, p.file(mid, ".log"), func(b []byte) []byte { return b[:len(b)-10] })
	stdout, stderr := wantExit(t, 1, "dump", p.dir)
	if strings.Count(stdout, "Dumping ") != len(p.segs) || !strings.Contains(stderr, p.file(mid, ".log")) {
		t.Errorf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
	wantExit(t, 1, "dump", t.TempDir())
}

func TestDumpIndexes(t *testing.T) {
	t.Parallel()
	p := buildPartition(t)
	const i = mid
	x, err := index.OpenOffsetReadOnly(p.file(i, ".index"), p.bases[i])
	if err != nil {
		t.Fatal(err)
	}
	var text, js strings.Builder
	for e := range x.Entries() {
		off, pos := x.Entry(e)
		fmt.Fprintf(&text, "offset: %d position: %d\n", off, pos)
		fmt.Fprintf(&js, `{"offset":%d,"position":%d}`+"\n", off, pos)
	}
	n := x.Entries()
	x.Close()
	if n == 0 {
		t.Fatal("no offset index entries")
	}
	ti, err := index.OpenTimeReadOnly(p.file(i, ".timeindex"), p.bases[i])
	if err != nil {
		t.Fatal(err)
	}
	var ttext, tjs strings.Builder
	for e := range ti.Entries() {
		ts, off := ti.Entry(e)
		fmt.Fprintf(&ttext, "timestamp: %d offset: %d\n", ts, off)
		fmt.Fprintf(&tjs, `{"timestamp":%d,"offset":%d}`+"\n", ts, off)
	}
	tn := ti.Entries()
	ti.Close()

	check := func(path, wantText, wantJSON string, entries int, zeros string) {
		t.Helper()
		stdout, _ := wantExit(t, 0, "dump", path)
		want := "Dumping " + path + "\n" + wantText + fmt.Sprintf("Summary: %d entries, 0 bad%s\n", entries, zeros)
		if stdout != want {
			t.Errorf("dump %s:\n%s\nwant:\n%s", path, stdout, want)
		}
		stdout, _ = wantExit(t, 0, "dump", "--json", path)
		if stdout != wantJSON {
			t.Errorf("dump --json %s:\n%s\nwant:\n%s", path, stdout, wantJSON)
		}
		for l := range strings.Lines(stdout) {
			var m map[string]int64
			if err := json.Unmarshal([]byte(l), &m); err != nil || len(m) != 2 {
				t.Errorf("bad JSON line %q: %v", l, err)
			}
		}
	}
	check(p.file(i, ".index"), text.String(), js.String(), n, "")
	check(p.file(i, ".timeindex"), ttext.String(), tjs.String(), tn, "")

	// An index that was never trimmed ends in zeros that are not entries.
	modify(t, p.file(i, ".index"), func(b []byte) []byte { return append(b, make([]byte, 800)...) })
	modify(t, p.file(i, ".timeindex"), func(b []byte) []byte { return append(b, make([]byte, 1200)...) })
	check(p.file(i, ".index"), text.String(), js.String(), n, ", 800 bytes of preallocated zeros after the last")
	check(p.file(i, ".timeindex"), ttext.String(), tjs.String(), tn, ", 1200 bytes of preallocated zeros after the last")

	// The base offset comes from the name.
	odd := filepath.Join(t.TempDir(), "x.index")
	copyFile(t, p.file(i, ".index"), odd)
	if _, stderr := wantExit(t, 1, "dump", odd); !strings.Contains(stderr, "20-digit") {
		t.Errorf("stderr %q", stderr)
	}
	// An entry out of order is shown and reported.
	modify(t, p.file(i, ".index"), func(b []byte) []byte {
		binary.BigEndian.PutUint32(b[0:], 1<<20)
		return b
	})
	stdout, stderr := wantExit(t, 1, "dump", p.file(i, ".index"))
	if !strings.Contains(stdout, "error: entry 1 ") || !strings.Contains(stderr, "entry 1 ") {
		t.Errorf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
}

// checkpointV1 is a checksummed checkpoint file of partition orders-0.
func checkpointV1(offset int64) []byte {
	body := fmt.Appendf(nil, "1\n1\norders 0 %d\n", offset)
	return fmt.Appendf(body, "%08x\n", crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)))
}

// Each damage a cleanly closed partition can suffer that costs data (or, for
// the .txnindex, would show aborted records) is corruption: exit 1, the
// file named once, in the report.
func TestVerifyFindsDamagedFiles(t *testing.T) {
	t.Parallel()
	last := func(p testPartition) int { return len(p.segs) - 1 }
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, p testPartition)
		want   func(p testPartition) string
	}{
		{"last segment cut inside a batch", func(t *testing.T, p testPartition) {
			modify(t, p.file(last(p), ".log"), func(b []byte) []byte { return b[:len(b)-7] })
		}, func(p testPartition) string { return p.file(last(p), ".log") + ": batch at position" }},
		{"last segment cut at a batch boundary", func(t *testing.T, p testPartition) {
			starts := batchStarts(t, p.file(last(p), ".log"))
			modify(t, p.file(last(p), ".log"), func(b []byte) []byte { return b[:starts[len(starts)-1]] })
			for _, suffix := range []string{".index", ".timeindex"} {
				if err := os.Remove(p.file(last(p), suffix)); err != nil {
					t.Fatal(err)
				}
			}
		}, func(p testPartition) string { return "recovery-point-offset-checkpoint: offsets" }},
		{"log start past the end, Kafka's format", func(t *testing.T, p testPartition) {
			if err := os.WriteFile(filepath.Join(p.dir, "log-start-offset-checkpoint"), []byte("0\n1\norders 0 100000\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, func(p testPartition) string { return "log-start-offset-checkpoint: Kafka's unchecked format" }},
		{"log start past the end, checksummed", func(t *testing.T, p testPartition) {
			if err := os.WriteFile(filepath.Join(p.dir, "log-start-offset-checkpoint"), checkpointV1(100000), 0o644); err != nil {
				t.Fatal(err)
			}
		}, func(p testPartition) string { return "log-start-offset-checkpoint: log start 100000 past the log end" }},
		{"checkpoint checksum", func(t *testing.T, p testPartition) {
			modify(t, filepath.Join(p.dir, "recovery-point-offset-checkpoint"), func(b []byte) []byte {
				return bytes.Replace(b, []byte("orders 0 "), []byte("orders 0 1"), 1)
			})
		}, func(p testPartition) string { return "recovery-point-offset-checkpoint: damaged (checksum" }},
		{"older segment zeroed", func(t *testing.T, p testPartition) {
			modify(t, p.file(mid, ".log"), func(b []byte) []byte { return make([]byte, len(b)) })
		}, func(p testPartition) string { return strings.TrimSuffix(p.file(mid, ".log"), "log") }},
		{"older segment emptied", func(t *testing.T, p testPartition) {
			modify(t, p.file(mid, ".log"), func([]byte) []byte { return nil })
			for _, suffix := range []string{".index", ".timeindex"} {
				if err := os.Remove(p.file(mid, suffix)); err != nil {
					t.Fatal(err)
				}
			}
		}, func(p testPartition) string {
			return fmt.Sprintf("%s: offsets %d..%d missing before it", p.file(mid+1, ".log"), p.bases[mid], p.bases[mid+1])
		}},
		{"one byte flipped", func(t *testing.T, p testPartition) {
			starts := batchStarts(t, p.file(mid, ".log"))
			modify(t, p.file(mid, ".log"), func(b []byte) []byte { b[starts[1]+batch.HeaderSize+3] ^= 1; return b })
		}, func(p testPartition) string { return "batch CRC mismatch" }},
		{".txnindex deleted", func(t *testing.T, p testPartition) {
			if err := os.Remove(p.file(mid, ".txnindex")); err != nil {
				t.Fatal(err)
			}
		}, func(p testPartition) string { return p.file(mid, ".txnindex") + ": missing" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := buildPartition(t)
			wantExit(t, 0, "verify", p.dir)
			tc.damage(t, p)
			stdout, stderr := wantExit(t, 1, "verify", p.dir)
			if want := tc.want(p); strings.Count(stdout, want) != 1 || stderr != "" {
				t.Errorf("want %q once on stdout, nothing on stderr; stdout:\n%s\nstderr:\n%s", want, stdout, stderr)
			}
		})
	}
}

// What a crash leaves at the end of a log not closed cleanly (a torn last
// batch, .txnindex entries whose markers it took) is repaired by the next
// open: exit 3, with the bytes recovery cuts and where. The same files in a
// log closed cleanly are corruption.
func TestVerifyRepairableCrashImages(t *testing.T) {
	t.Parallel()
	p := buildPartition(t)
	lastLog := p.file(len(p.segs)-1, ".log")
	starts := batchStarts(t, lastLog)
	st, err := os.Stat(lastLog)
	if err != nil {
		t.Fatal(err)
	}
	torn := starts[len(starts)-1]
	modify(t, lastLog, func(b []byte) []byte {
		b[torn+batch.HeaderSize] ^= 0xff
		return b
	})
	// An aborted transaction whose marker was the torn batch.
	entry := make([]byte, 34)
	binary.BigEndian.PutUint64(entry[2:], 7)
	binary.BigEndian.PutUint64(entry[10:], uint64(p.bases[len(p.bases)-1]))
	binary.BigEndian.PutUint64(entry[18:], uint64(testBatches*testRecords-1))
	binary.BigEndian.PutUint64(entry[26:], uint64(testBatches*testRecords))
	if err := os.WriteFile(p.file(len(p.segs)-1, ".txnindex"), entry, 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ := wantExit(t, 1, "verify", p.dir)
	if !strings.Contains(out, lastLog+": batch at position") {
		t.Errorf("closed cleanly: stdout:\n%s", out)
	}

	// A crash: no clean-shutdown marker, and a recovery point below the
	// torn batch (it never passes what was synced).
	if err := os.Remove(filepath.Join(p.dir, ".kafka_cleanshutdown")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p.dir, "recovery-point-offset-checkpoint"), checkpointV1(p.bases[len(p.bases)-1]), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ = wantExit(t, 3, "verify", p.dir)
	for _, want := range []string{
		fmt.Sprintf("repairable: %s: unclean tail that recovery will cut (%d bytes, from position %d)", lastLog, st.Size()-torn, torn),
		"repairable: " + strings.TrimSuffix(lastLog, ".log") + ".txnindex: 1 entries whose abort markers did not survive",
		"REPAIRABLE",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	// Corruption elsewhere outranks it.
	modify(t, p.file(0, ".log"), func(b []byte) []byte { b[batch.HeaderSize+5] ^= 1; return b })
	wantExit(t, 1, "verify", p.dir)
}

func verifyTestBatch(t *testing.T, records int) []byte {
	t.Helper()
	return testutil.Batch(t, testutil.BatchSpec{Records: records, Value: func(int) []byte { return []byte("value") },
		Timestamp: 1700000000000, TimestampStep: 1})
}

// TestVerifyOffsetOverflow: the base offset is not covered by the
// CRC. A batch whose base offset is near MaxInt64 has a last offset that
// overflows to a negative number; verify must reject it (offset too far
// from the segment's base), not pass it with negative offsets.
func TestVerifyOffsetOverflow(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "t-0")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b := verifyTestBatch(t, 5)
	binary.BigEndian.PutUint64(b, math.MaxInt64-1)
	path := filepath.Join(dir, "00000000000000000000.log")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI("verify", path)
	if code != 1 {
		t.Errorf("verify of a batch at offset MaxInt64-1 with 5 records in segment 0: exit %d, want 1\n%s%s", code, stdout, stderr)
	}
}

// TestVerifyFreshActiveSegment: a partition that crashed right after
// a roll or its creation has an empty active segment with a preallocated
// (all-zero) .index. Opening recovers it; verify must accept it as it
// accepts zero tails of logs not closed cleanly.
func TestVerifyFreshActiveSegment(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	dir := filepath.Join(data, "t-0")
	l, err := partition.Open(dir, partition.Options{Segment: segment.Options{IndexMaxBytes: 4096}})
	if err != nil {
		t.Fatal(err)
	}
	l.Kill()
	idx, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, f := range idx {
		st, _ := os.Stat(f)
		t.Logf("%s %d", f, st.Size())
	}
	// The partition opens fine: it is recoverable.
	l2, err := partition.Open(dir, partition.Options{Segment: segment.Options{IndexMaxBytes: 4096}})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	l2.Kill()
	code, stdout, stderr := runCLI("verify", dir)
	if code != 0 {
		t.Errorf("verify of a fresh, killed partition: exit %d, want 0\n%s%s", code, stdout, stderr)
	}
}

// TestVerifyIndexHeap: verify maps the .log so that segments of any
// size stay off the heap, but reads the whole .index into memory: a large
// (here sparse, 1 GiB) index beside a one-batch segment costs its full
// size in heap.
func TestVerifyIndexHeap(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t-0")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "00000000000000000000.log"), verifyTestBatch(t, 3), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "00000000000000000000.index"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	code, stdout, stderr := runCLI("verify", dir)
	runtime.ReadMemStats(&m1)
	alloc := m1.TotalAlloc - m0.TotalAlloc
	t.Logf("exit %d, %d MiB allocated\n%s%s", code, alloc>>20, stdout, stderr)
	if alloc > 64<<20 {
		t.Errorf("verify allocated %d MiB for a 1 GiB sparse index", alloc>>20)
	}
}

// An index entry of the last segment pointing into the middle of a batch
// is damage in a log closed cleanly (exit 1) and, in the last segment of a
// log a crash left, a crash image the recovery scan rebuilds (exit 3): the
// index is written with the data, not synced before it, so a power cut can
// keep an entry whose batch it lost. The power-cut harness met both the
// .index and the .timeindex form.
func TestVerifyIndexOfUncleanTailRepairable(t *testing.T) {
	t.Parallel()
	p := buildPartition(t)
	lastLog := p.file(len(p.segs)-1, ".log")
	starts := batchStarts(t, lastLog)
	idx := p.file(len(p.segs)-1, ".index")
	modify(t, idx, func(b []byte) []byte {
		// One entry: relative offset 1, a position inside the first batch.
		e := make([]byte, 8)
		binary.BigEndian.PutUint32(e[0:], 1)
		binary.BigEndian.PutUint32(e[4:], uint32(starts[0]+7))
		return e
	})
	out, _ := wantExit(t, 1, "verify", p.dir)
	if !strings.Contains(out, "not a batch start") {
		t.Errorf("closed cleanly: stdout:\n%s", out)
	}
	if err := os.Remove(filepath.Join(p.dir, ".kafka_cleanshutdown")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p.dir, "recovery-point-offset-checkpoint"), checkpointV1(p.bases[len(p.bases)-1]), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ = wantExit(t, 3, "verify", p.dir)
	if !strings.Contains(out, "repairable: "+lastLog+": index that recovery rebuilds") {
		t.Errorf("not closed cleanly: stdout:\n%s", out)
	}
}

// TestVerifyGapCompactedTopic: the gap TestVerifyGap makes is lost data
// in a topic that is not compacted and what the cleaner leaves in one
// whose topic.config's cleanup.policy lists compact.
func TestVerifyGapCompactedTopic(t *testing.T) {
	p := buildPartition(t)
	for _, suffix := range []string{".log", ".index", ".timeindex", ".txnindex"} {
		if err := os.Remove(p.file(1, suffix)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	topicConfig := func(lines string) {
		sum := crc32.Checksum([]byte(lines), crc32.MakeTable(crc32.Castagnoli))
		data := fmt.Appendf(nil, "# idemlog topic.config version 1 crc32c=%08x\n%s", sum, lines)
		if err := os.WriteFile(filepath.Join(p.dir, "topic.config"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	topicConfig("cleanup.policy=delete\n")
	wantExit(t, 1, "verify", p.dir)
	topicConfig("cleanup.policy=compact\nretention.ms=-1\n")
	stdout, _ := wantExit(t, 0, "verify", p.dir)
	if want := fmt.Sprintf(", %d offsets skipped, closed cleanly, compacted topic", p.bases[2]-p.bases[1]); !strings.Contains(stdout, want) {
		t.Errorf("no %q in:\n%s", want, stdout)
	}
}

// TestVerifyCleaningLeftoversRepairable: a cleaning's .cleaned file (a
// crash before its swap began) is a crash image the next open repairs:
// exit status 3, not corruption.
func TestVerifyCleaningLeftoversRepairable(t *testing.T) {
	p := buildPartition(t)
	copyFile(t, p.file(0, ".log"), p.file(0, ".log")+".cleaned")
	if out, _ := wantExit(t, 3, "verify", p.dir); !strings.Contains(out, "did not finish") {
		t.Errorf("stdout %q", out)
	}
}

// A power cut under a sync policy other than always can keep a rolled
// segment's directory entry and its successor's while the rolled segment's
// unsynced batches are lost (emptied, or a zero tail). Above the recovery
// point that is a crash image: the next open cuts the log where the
// batches stop and deletes the later segments, and verify says so (exit 3)
// instead of calling the offsets lost (the power-cut harness met both forms
// under never and interval). Below the recovery point, or in a log closed
// cleanly, the same files lost durable data: exit 1.
func TestVerifyRolledSegmentTornAboveRecoveryPoint(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(p testPartition, k int) (end int64)
	}{
		{"emptied", func(p testPartition, k int) int64 {
			modify(t, p.file(k, ".log"), func([]byte) []byte { return nil })
			return p.bases[k]
		}},
		{"zero tail", func(p testPartition, k int) int64 {
			starts := batchStarts(t, p.file(k, ".log"))
			modify(t, p.file(k, ".log"), func(b []byte) []byte {
				clear(b[starts[1]:])
				return b
			})
			return p.bases[k] + testRecords
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := buildPartition(t)
			k := len(p.bases) - 2
			end := tc.damage(p, k)
			wantExit(t, 1, "verify", p.dir)

			if err := os.Remove(filepath.Join(p.dir, ".kafka_cleanshutdown")); err != nil {
				t.Fatal(err)
			}
			rpFile := filepath.Join(p.dir, "recovery-point-offset-checkpoint")
			// The recovery point at the damaged segment's successor: its
			// batches were durable, and their loss is corruption.
			if err := os.WriteFile(rpFile, checkpointV1(p.bases[k+1]), 0o644); err != nil {
				t.Fatal(err)
			}
			wantExit(t, 1, "verify", p.dir)

			if err := os.WriteFile(rpFile, checkpointV1(p.bases[k]), 0o644); err != nil {
				t.Fatal(err)
			}
			out, _ := wantExit(t, 3, "verify", p.dir)
			want := fmt.Sprintf("repairable: %s: its batches end at offset %d, below the next segment's base %d", p.file(k, ".log"), end, p.bases[k+1])
			if !strings.Contains(out, want) || !strings.Contains(out, "the next open deletes the 1 segment after it") {
				t.Fatalf("no %q in:\n%s", want, out)
			}
			// dump shows what verify passes: the zero tail is the crash's.
			wantExit(t, 0, "dump", p.file(k, ".log"))
			wantExit(t, 0, "dump", p.dir)
			// What verify announced is what the open does.
			l, err := partition.Open(p.dir, partition.Options{Segment: segment.Options{MaxBytes: 4096, IndexIntervalBytes: 256, IndexMaxBytes: 4096}})
			if err != nil {
				t.Fatal(err)
			}
			if got := l.LogEndOffset(); got != end {
				t.Errorf("log end after open %d, verify announced %d", got, end)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			wantExit(t, 0, "verify", p.dir)
		})
	}
}

// A power cut under a sync policy other than always can lose a segment's
// .txnindex (created at the roll, not yet synced) or leave a torn entry at
// its end. In a segment the next open scans, the scan rebuilds the index
// from the markers: exit 3. In a log closed cleanly the same files would
// show aborted records to read_committed readers: exit 1.
func TestVerifyTxnIndexOfRecoveredSegmentRepairable(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(path string)
		want   string
	}{
		{"missing", func(path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}, "txnindex: missing in a segment the next open scans"},
		{"torn entry", func(path string) {
			// An entry whose last offset is below its first: zeros where
			// the end of a write did not reach the disk.
			entry := make([]byte, 34)
			binary.BigEndian.PutUint64(entry[2:], 7)
			binary.BigEndian.PutUint64(entry[10:], 3)
			if err := os.WriteFile(path, entry, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "index that recovery rebuilds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := buildPartition(t)
			last := len(p.bases) - 1
			tc.damage(p.file(last, ".txnindex"))
			wantExit(t, 1, "verify", p.dir)
			if err := os.Remove(filepath.Join(p.dir, ".kafka_cleanshutdown")); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(p.dir, "recovery-point-offset-checkpoint"), checkpointV1(p.bases[last]), 0o644); err != nil {
				t.Fatal(err)
			}
			out, _ := wantExit(t, 3, "verify", p.dir)
			if !strings.Contains(out, tc.want) {
				t.Fatalf("no %q in:\n%s", tc.want, out)
			}
		})
	}
}
