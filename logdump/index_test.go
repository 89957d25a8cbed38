package logdump

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// offsetEntries encodes {relOffset, position} pairs as an .index file.
func offsetEntries(pairs ...int32) []byte {
	var b []byte
	for _, v := range pairs {
		b = binary.BigEndian.AppendUint32(b, uint32(v))
	}
	return b
}

// timeEntry encodes one .timeindex entry.
func timeEntry(ts int64, rel int32) []byte {
	return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(nil, uint64(ts)), uint32(rel))
}

func writeIndex(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// dumpIndex returns the text dump, the JSON dump, the JSON warnings and the
// error of the text dump.
func dumpIndex(t *testing.T, path string) (text, js, warn string, err error) {
	t.Helper()
	var out, jout, w bytes.Buffer
	err = DumpPath(&out, path, Options{})
	jerr := DumpPath(&jout, path, Options{JSON: true, Warn: &w})
	if (err == nil) != (jerr == nil) {
		t.Fatalf("text error %v, JSON error %v", err, jerr)
	}
	return out.String(), jout.String(), w.String(), err
}

func TestDumpOffsetIndex(t *testing.T) {
	t.Parallel()
	const name = "00000000000000001000.index"
	// Three entries, then the zeros of a preallocated index never trimmed.
	data := append(offsetEntries(5, 100, 9, 300, 20, 700), make([]byte, 24)...)
	text, js, _, err := dumpIndex(t, writeIndex(t, name, data))
	if err != nil {
		t.Fatal(err)
	}
	wantText := "offset: 1005 position: 100\noffset: 1009 position: 300\noffset: 1020 position: 700\n" +
		"Summary: 3 entries, 0 bad, 24 bytes of preallocated zeros after the last\n"
	if !strings.HasPrefix(text, "Dumping ") || !strings.HasSuffix(text, name+"\n"+wantText) {
		t.Errorf("text:\n%s\nwant:\n%s", text, wantText)
	}
	wantJSON := `{"offset":1005,"position":100}` + "\n" + `{"offset":1009,"position":300}` + "\n" + `{"offset":1020,"position":700}` + "\n"
	if js != wantJSON {
		t.Errorf("JSON:\n%s\nwant:\n%s", js, wantJSON)
	}
}

func TestDumpTimeIndex(t *testing.T) {
	t.Parallel()
	const name = "00000000000000000042.timeindex"
	for _, c := range []struct {
		data     []byte
		text, js string
	}{
		{
			data: bytes.Join([][]byte{timeEntry(1700000000000, 3), timeEntry(1700000000500, 3), timeEntry(1700000001000, 8), make([]byte, 12)}, nil),
			text: "timestamp: 1700000000000 offset: 45\ntimestamp: 1700000000500 offset: 45\ntimestamp: 1700000001000 offset: 50\n" +
				"Summary: 3 entries, 0 bad, 12 bytes of preallocated zeros after the last\n",
			js: `{"timestamp":1700000000000,"offset":45}` + "\n" + `{"timestamp":1700000000500,"offset":45}` + "\n" +
				`{"timestamp":1700000001000,"offset":50}` + "\n",
		},
		// A first entry {0, 0} is an entry when another follows it ...
		{
			data: append(timeEntry(0, 0), timeEntry(7, 1)...),
			text: "timestamp: 0 offset: 42\ntimestamp: 7 offset: 43\nSummary: 2 entries, 0 bad\n",
			js:   `{"timestamp":0,"offset":42}` + "\n" + `{"timestamp":7,"offset":43}` + "\n",
		},
		// ... and cannot be told from an empty slot when none does, as in
		// package index.
		{data: make([]byte, 36), text: "Summary: 0 entries, 0 bad, 36 bytes of preallocated zeros after the last\n"},
		{data: nil, text: "Summary: 0 entries, 0 bad\n"},
	} {
		text, js, _, err := dumpIndex(t, writeIndex(t, name, c.data))
		if err != nil {
			t.Fatal(err)
		}
		if _, body, _ := strings.Cut(text, "\n"); body != c.text || !strings.HasPrefix(text, "Dumping ") {
			t.Errorf("text:\n%s\nwant:\n%s", text, c.text)
		}
		if js != c.js {
			t.Errorf("JSON:\n%s\nwant:\n%s", js, c.js)
		}
	}
}

func TestDumpBadIndex(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, why string
		data      []byte
		text      string // a line the text dump must hold
	}{
		{"00000000000000000010.index", "zero entry in the middle", offsetEntries(1, 50, 0, 0, 3, 90), "offset: 10 position: 0\nerror: entry 1 "},
		{"00000000000000000010.index", "offset falls", offsetEntries(4, 50, 3, 90), "error: entry 1 {offset 13, position 90} does not follow entry 0 {offset 14, position 50}"},
		{"00000000000000000010.index", "position falls", offsetEntries(4, 50, 5, 40), "error: entry 1 "},
		{"00000000000000000010.index", "below base", offsetEntries(-1, 50), "error: entry 0 {offset 9, position 50}: offset below the base 10"},
		{"00000000000000000010.index", "partial entry", append(offsetEntries(1, 50), 0, 0, 1), "error: 3 bytes at position 8 are not a whole 8-byte entry"},
		{"00000000000000000010.timeindex", "timestamp repeats", append(timeEntry(5, 1), timeEntry(5, 2)...), "error: entry 1 "},
		{"00000000000000000010.timeindex", "offset falls", append(timeEntry(5, 2), timeEntry(6, 1)...), "error: entry 1 "},
	} {
		text, js, warn, err := dumpIndex(t, writeIndex(t, c.name, c.data))
		if !errors.Is(err, ErrIndex) || !strings.Contains(err.Error(), c.name) {
			t.Errorf("%s: err = %v, want ErrIndex naming the file", c.why, err)
		}
		if !strings.Contains(text, c.text) {
			t.Errorf("%s: no %q in:\n%s", c.why, c.text, text)
		}
		if strings.Contains(js, "error") || c.why != "partial entry" && !strings.Contains(warn, c.name) {
			t.Errorf("%s: JSON %q, warnings %q", c.why, js, warn)
		}
	}
	// Offsets are relative to a base that only the name gives.
	if err := DumpPath(&bytes.Buffer{}, writeIndex(t, "x.index", offsetEntries(1, 50)), Options{}); err == nil ||
		!strings.Contains(err.Error(), "20-digit") {
		t.Errorf("odd name: err = %v", err)
	}
}

func TestDumpDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sample := sampleBytes(t)
	// Named out of lexical order only by the stray, which comes last.
	for _, name := range []string{"aaa.log", "00000000000000000100.log", "00000000000000000020.log"} {
		if err := os.WriteFile(filepath.Join(dir, name), sample, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub.log"), 0o755); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := DumpPath(&out, dir, Options{NoRecords: true}); err != nil {
		t.Fatal(err)
	}
	var order []string
	for l := range strings.Lines(out.String()) {
		if name, ok := strings.CutPrefix(l, "Dumping "); ok {
			order = append(order, filepath.Base(strings.TrimSpace(name)))
		}
	}
	if want := "00000000000000000020.log 00000000000000000100.log aaa.log"; strings.Join(order, " ") != want {
		t.Errorf("dumped %q, want %s", order, want)
	}
	// Every file is dumped; each bad one contributes its own error.
	for _, name := range []string{"aaa.log", "00000000000000000020.log"} {
		if err := os.WriteFile(filepath.Join(dir, name), sample[:len(sample)-1], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out.Reset()
	err := DumpPath(&out, dir, Options{})
	j, ok := err.(interface{ Unwrap() []error })
	if !ok || len(j.Unwrap()) != 2 || strings.Count(out.String(), "Summary: ") != 3 {
		t.Errorf("err = %v; output:\n%s", err, out.String())
	}
	if err := DumpPath(&out, t.TempDir(), Options{}); err == nil || !strings.Contains(err.Error(), "no .log files") {
		t.Errorf("empty dir: err = %v", err)
	}
}

// TestIndexNegativePosition: an offset index entry holds a file
// position; a negative one (a garbage index) must be reported as a bad
// entry, whichever entry it is.
func TestIndexNegativePosition(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "00000000000000000100.index")
	idx := make([]byte, 16)
	binary.BigEndian.PutUint32(idx[0:], 5)
	binary.BigEndian.PutUint32(idx[4:], 0xFFFFFF00) // position -256
	binary.BigEndian.PutUint32(idx[8:], 9)
	binary.BigEndian.PutUint32(idx[12:], 4096)
	if err := os.WriteFile(path, idx, 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := DumpPath(&out, path, Options{})
	if err == nil {
		t.Errorf("dump of an index whose first entry has position -256: no error\n%s", out.String())
	}
}
