package logdump

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/idemlog/idemlog/batch"
)

func TestGoldenJSON(t *testing.T) {
	t.Parallel()
	out, sum, err := dumpString(t, sampleBytes(t), Options{JSON: true})
	if err != nil {
		t.Fatalf("Dump: %v", err)
	}
	if sum.Batches != 10 || sum.Records != 31 || sum.Corrupt != 0 || sum.FirstCorrupt != -1 ||
		sum.Bytes != int64(len(sampleBytes(t))) {
		t.Fatalf("summary %+v", sum)
	}
	checkGolden(t, goldenJSON, out)
}

func TestGoldenText(t *testing.T) {
	t.Parallel()
	out, _, err := dumpString(t, sampleBytes(t), Options{})
	if err != nil {
		t.Fatalf("Dump: %v", err)
	}
	checkGolden(t, goldenText, out)
}

// The JSON format leans on this encoding/json behaviour to tell null from
// empty; if it ever changed, the format would silently change with it.
func TestJSONByteEncoding(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		v    []byte
		want string
	}{{nil, "null"}, {[]byte{}, `""`}, {[]byte("hi"), `"aGk="`}} {
		got, err := json.Marshal(c.v)
		if err != nil || string(got) != c.want {
			t.Errorf("json.Marshal(%#v) = %s, %v; want %s", c.v, got, err, c.want)
		}
	}
}

// decodeLines parses JSON output, keeping null apart from absent.
func decodeLines(t *testing.T, out string) []map[string]json.RawMessage {
	t.Helper()
	var lines []map[string]json.RawMessage
	for l := range strings.Lines(out) {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	return lines
}

func records(t *testing.T, m map[string]json.RawMessage) []map[string]json.RawMessage {
	t.Helper()
	var recs []map[string]json.RawMessage
	if err := json.Unmarshal(m["records"], &recs); err != nil {
		t.Fatal(err)
	}
	return recs
}

func TestJSONNullVersusEmpty(t *testing.T) {
	t.Parallel()
	out, _, err := dumpString(t, sampleBytes(t), Options{JSON: true})
	if err != nil {
		t.Fatal(err)
	}
	recs := records(t, decodeLines(t, out)[0])
	for _, c := range []struct {
		rec         int
		field, want string
	}{
		{0, "key", `"azE="`},
		{0, "headers", `[{"key":"a","value":"MQ=="},{"key":"b","value":null}]`},
		{1, "key", "null"},
		{1, "headers", "[]"},
		{2, "key", `""`},
		{2, "value", `""`},
		{3, "value", "null"},
	} {
		if got := string(recs[c.rec][c.field]); got != c.want {
			t.Errorf("record %d %s = %s, want %s", c.rec, c.field, got, c.want)
		}
	}
}

func TestJSONFieldOrder(t *testing.T) {
	t.Parallel()
	out, _, err := dumpString(t, sampleBytes(t), Options{JSON: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"baseOffset", "lastOffset", "producerId", "producerEpoch", "baseSequence",
		"isTransactional", "isControl", "compression", "crcValid", "deleteHorizonMs", "gapBefore", "emptied", "records"}
	for l := range strings.Lines(out) {
		dec := json.NewDecoder(strings.NewReader(l))
		if _, err := dec.Token(); err != nil {
			t.Fatal(err)
		}
		var got []string
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, k.(string))
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				t.Fatal(err)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("fields %v, want %v", got, want)
		}
	}
}

func TestNoRecords(t *testing.T) {
	t.Parallel()
	data := sampleBytes(t)
	out, sum, err := dumpString(t, data, Options{JSON: true, NoRecords: true})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Records != 31 {
		t.Errorf("records counted: %d, want 31", sum.Records)
	}
	for _, m := range decodeLines(t, out) {
		if string(m["records"]) != "[]" {
			t.Fatalf("records = %s, want []", m["records"])
		}
	}
	out, _, err = dumpString(t, data, Options{NoRecords: true})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "| offset") || strings.Count(out, "baseOffset: ") != 10 {
		t.Fatalf("text without records:\n%s", out)
	}
}

// A reader that hands over one byte at a time exercises every partial read
// in the framing and batch reads.
func TestOneByteReader(t *testing.T) {
	t.Parallel()
	data := sampleBytes(t)
	want, _, _ := dumpString(t, data, Options{JSON: true})
	var out bytes.Buffer
	if _, err := Dump(&out, sampleName, iotest.OneByteReader(bytes.NewReader(data)), Options{JSON: true}); err != nil {
		t.Fatal(err)
	}
	if out.String() != want {
		t.Fatal("output differs when reading one byte at a time")
	}
}

func TestDumpFile(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	sum, err := DumpFile(&out, testdata(sampleLog), Options{})
	if err != nil || sum.Batches != 10 {
		t.Fatalf("DumpFile: %+v, %v", sum, err)
	}
	if _, err := DumpFile(io.Discard, filepath.Join(t.TempDir(), "missing.log"), Options{}); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestEmptyInput(t *testing.T) {
	t.Parallel()
	out, sum, err := dumpString(t, nil, Options{})
	if err != nil || sum.Batches != 0 || sum.FirstCorrupt != -1 {
		t.Fatalf("empty input: %+v, %v", sum, err)
	}
	if !strings.HasSuffix(out, "Summary: 0 batches, 0 records, 0 bytes, 0 corrupt\n") {
		t.Fatalf("output:\n%s", out)
	}
}

// positions returns the start of every batch in a well-formed segment.
func positions(t *testing.T, data []byte) []int {
	t.Helper()
	var pos []int
	it := batch.NewIter(data)
	for it.Next() {
		pos = append(pos, it.Pos())
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return pos
}

// dumpBoth dumps data in both formats and returns the text output, the
// JSON output, the JSON mode's warnings, and JSON's summary and error.
func dumpBoth(t *testing.T, data []byte) (text, js, warn string, sum Summary, err error) {
	t.Helper()
	text, tsum, terr := dumpString(t, data, Options{})
	var w bytes.Buffer
	js, sum, err = dumpString(t, data, Options{JSON: true, Warn: &w})
	if tsum != sum || fmt.Sprint(terr) != fmt.Sprint(err) {
		t.Fatalf("text and JSON disagree: %+v %v / %+v %v", tsum, terr, sum, err)
	}
	return text, js, w.String(), sum, err
}

func TestCorruptCRCStillDecodes(t *testing.T) {
	t.Parallel()
	data := bytes.Clone(sampleBytes(t))
	pos := positions(t, data)
	// Batch 5 is uncompressed and ends with the value "credit 40" and a
	// zero header count: changing the value's last digit breaks the CRC but
	// not the structure.
	p := pos[5]
	end := pos[6]
	data[end-2] ^= 0x01 // "credit 40" -> "credit 41"
	text, js, warn, sum, err := dumpBoth(t, data)
	if !errors.Is(err, batch.ErrCRC) {
		t.Fatalf("err = %v, want ErrCRC", err)
	}
	at := fmt.Sprintf("position %d", p)
	if !strings.Contains(err.Error(), sampleName) || !strings.Contains(err.Error(), at) {
		t.Errorf("error %q does not name the file and %s", err, at)
	}
	if sum.Batches != 10 || sum.Corrupt != 1 || sum.FirstCorrupt != int64(p) || sum.Records != 31 {
		t.Errorf("summary %+v", sum)
	}
	lines := decodeLines(t, js)
	if len(lines) != 10 {
		t.Fatalf("%d JSON lines, want 10: the dump must go on past a bad CRC", len(lines))
	}
	if string(lines[5]["crcValid"]) != "false" || string(lines[4]["crcValid"]) != "true" {
		t.Errorf("crcValid: batch 5 %s, batch 4 %s", lines[5]["crcValid"], lines[4]["crcValid"])
	}
	recs := records(t, lines[5])
	if len(recs) != 2 || string(recs[1]["value"]) != `"Y3JlZGl0IDQx"` { // "credit 41"
		t.Errorf("records of the corrupt batch: %s", lines[5]["records"])
	}
	if !strings.Contains(warn, sampleName+": ") || !strings.Contains(warn, at) || strings.Count(warn, "\n") != 1 {
		t.Errorf("warning %q", warn)
	}
	for _, want := range []string{"position: " + fmt.Sprint(p), "isvalid: false", "error: cannot check batch at " + at,
		"payload: credit 41", fmt.Sprintf("1 corrupt (first at position %d)", p)} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
}

func TestCorruptCompressedRecords(t *testing.T) {
	t.Parallel()
	data := bytes.Clone(sampleBytes(t))
	pos := positions(t, data)
	p := pos[1] // gzip
	data[p+batch.HeaderSize+20] ^= 0xff
	text, js, warn, sum, err := dumpBoth(t, data)
	if !errors.Is(err, batch.ErrCRC) {
		t.Fatalf("err = %v, want ErrCRC", err)
	}
	lines := decodeLines(t, js)
	if len(lines) != 10 || string(lines[1]["crcValid"]) != "false" || string(lines[1]["records"]) != "[]" {
		t.Fatalf("batch 1: %v", lines[1])
	}
	if sum.Corrupt != 1 || sum.Records != 28 || sum.FirstCorrupt != int64(p) {
		t.Errorf("summary %+v", sum)
	}
	if strings.Count(warn, "\n") != 2 || !strings.Contains(warn, "cannot decode records of batch at position "+fmt.Sprint(p)) {
		t.Errorf("warnings %q", warn)
	}
	if strings.Contains(text, "key: order-1") {
		t.Errorf("records of an undecodable batch printed:\n%s", text)
	}
}

// A batch whose CRC holds but whose records do not parse is still corrupt.
func TestValidCRCBadRecords(t *testing.T) {
	t.Parallel()
	bld := batch.NewBuilder(batch.CodecNone)
	bld.Append(baseTS, []byte("k"), []byte("v"), nil)
	b, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Clone(b)
	data[batch.HeaderSize] = 0x7f // record length -64
	binary.BigEndian.PutUint32(data[17:], batch.Batch(data).ComputeCRC())
	_, js, _, sum, err := dumpBoth(t, data)
	if !errors.Is(err, batch.ErrRecord) || sum.Corrupt != 1 {
		t.Fatalf("err = %v, summary %+v", err, sum)
	}
	l := decodeLines(t, js)[0]
	if string(l["crcValid"]) != "true" || string(l["records"]) != "[]" {
		t.Fatalf("line %v", l)
	}
}

func TestTruncated(t *testing.T) {
	t.Parallel()
	full := sampleBytes(t)
	pos := positions(t, full)
	for _, c := range []struct {
		name string
		cut  int
		at   int // index of the torn batch
	}{
		{"mid-batch", pos[4] + 70, 4},
		{"mid-header", pos[4] + 30, 4},
		{"mid-framing", pos[9] + 5, 9},
		{"one byte", pos[2] + 1, 2},
		{"last byte missing", len(full) - 1, 9},
	} {
		t.Run(c.name, func(t *testing.T) {
			text, js, _, sum, err := dumpBoth(t, full[:c.cut])
			if !errors.Is(err, batch.ErrTruncated) {
				t.Fatalf("err = %v, want ErrTruncated", err)
			}
			at := fmt.Sprintf("position %d", pos[c.at])
			if !strings.Contains(err.Error(), sampleName) || !strings.Contains(err.Error(), at) {
				t.Errorf("error %q does not name the file and %s", err, at)
			}
			if sum.Batches != int64(c.at) || sum.Bytes != int64(pos[c.at]) || sum.FirstCorrupt != int64(pos[c.at]) {
				t.Errorf("summary %+v", sum)
			}
			if n := len(decodeLines(t, js)); n != c.at {
				t.Errorf("%d JSON lines, want the %d whole batches", n, c.at)
			}
			if !strings.Contains(text, "error: cannot ") || !strings.Contains(text, "stopped at "+at+"\n") {
				t.Errorf("text output:\n%s", text)
			}
		})
	}
}

func TestImpossibleFraming(t *testing.T) {
	t.Parallel()
	full := sampleBytes(t)
	pos := positions(t, full)
	p := pos[3]
	for _, c := range []struct {
		name  string
		patch func(b []byte)
		want  error
	}{
		{"zero length", func(b []byte) { binary.BigEndian.PutUint32(b[p+8:], 0) }, batch.ErrTooSmall},
		{"negative length", func(b []byte) { binary.BigEndian.PutUint32(b[p+8:], 0x80000000) }, batch.ErrTooSmall},
		{"below header", func(b []byte) { binary.BigEndian.PutUint32(b[p+8:], batch.HeaderSize-batch.LogOverhead-1) }, batch.ErrTooSmall},
		{"huge length", func(b []byte) { binary.BigEndian.PutUint32(b[p+8:], 0x7fffffff) }, batch.ErrTooLarge},
		{"magic 1", func(b []byte) { b[p+16] = 1 }, batch.ErrMagic},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := bytes.Clone(full)
			c.patch(data)
			_, js, _, sum, err := dumpBoth(t, data)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("position %d", p)) {
				t.Errorf("error %q lacks the position", err)
			}
			if sum.Batches != 3 || len(decodeLines(t, js)) != 3 {
				t.Errorf("summary %+v", sum)
			}
		})
	}
}

func TestMaxBatchSize(t *testing.T) {
	t.Parallel()
	data := sampleBytes(t)
	_, sum, err := dumpString(t, data, Options{MaxBatchSize: 200})
	if !errors.Is(err, batch.ErrTooLarge) || sum.Batches != 4 { // batch 4 (zstd) is 327 bytes
		t.Fatalf("err = %v, summary %+v", err, sum)
	}
}

func TestMaxInflate(t *testing.T) {
	t.Parallel()
	_, sum, err := dumpString(t, sampleBytes(t), Options{MaxInflate: 512})
	if !errors.Is(err, batch.ErrInflateLimit) || sum.Corrupt != 1 || sum.Batches != 10 {
		t.Fatalf("err = %v, summary %+v", err, sum)
	}
}

// Both corrupt batches and a torn tail: the error carries both sentinels.
func TestCorruptThenTruncated(t *testing.T) {
	t.Parallel()
	data := bytes.Clone(sampleBytes(t))
	pos := positions(t, data)
	data[pos[1]+30] ^= 1
	_, sum, err := dumpString(t, data[:len(data)-3], Options{})
	if !errors.Is(err, batch.ErrCRC) || !errors.Is(err, batch.ErrTruncated) {
		t.Fatalf("err = %v", err)
	}
	if sum.FirstCorrupt != int64(pos[1]) || sum.Bytes != int64(pos[9]) {
		t.Fatalf("summary %+v", sum)
	}
}

// A length that claims tens of megabytes over a few bytes must not cost
// tens of megabytes.
func TestTornLengthIsNotAllocated(t *testing.T) {
	data := make([]byte, 100)
	binary.BigEndian.PutUint32(data[8:], 60<<20)
	data[16] = batch.Magic
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, _, err := dumpString(t, data, Options{JSON: true})
	runtime.ReadMemStats(&after)
	if !errors.Is(err, batch.ErrTruncated) {
		t.Fatalf("err = %v", err)
	}
	if d := after.TotalAlloc - before.TotalAlloc; d > 4<<20 {
		t.Fatalf("allocated %d bytes for a 100-byte input", d)
	}
}

func TestGarbage(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 200 {
		data := make([]byte, 1+rng.IntN(4096))
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		_, js, _, sum, err := dumpBoth(t, data)
		if err == nil {
			t.Fatalf("garbage %d: no error (summary %+v)", i, sum)
		}
		if !errors.Is(err, batch.ErrTruncated) && !errors.Is(err, batch.ErrTooSmall) &&
			!errors.Is(err, batch.ErrTooLarge) && !errors.Is(err, batch.ErrMagic) {
			t.Fatalf("garbage %d: %v", i, err)
		}
		if sum.Bytes > int64(len(data)) || int64(strings.Count(js, "\n")) != sum.Batches {
			t.Fatalf("garbage %d: summary %+v", i, sum)
		}
	}
}

// Flipping every byte of the sample in turn must never panic, and every
// flip outside the uncovered leader epoch and base offset must be noticed.
func TestEveryByteFlipped(t *testing.T) {
	t.Parallel()
	full := sampleBytes(t)
	pos := positions(t, full)
	uncovered := map[int]bool{}
	for _, p := range pos {
		for i := range 8 {
			uncovered[p+i] = true // baseOffset
		}
		for i := 12; i < 16; i++ {
			uncovered[p+i] = true // partitionLeaderEpoch
		}
	}
	data := bytes.Clone(full)
	for i := range data {
		data[i] ^= 0xff
		sum, err := Dump(io.Discard, sampleName, bytes.NewReader(data), Options{JSON: true})
		data[i] ^= 0xff
		if uncovered[i] != (err == nil) {
			t.Fatalf("byte %d flipped: err = %v", i, err)
		}
		if sum.Bytes > int64(len(data)) {
			t.Fatalf("byte %d flipped: summary %+v", i, sum)
		}
	}
}

type failWriter struct{ n int }

func (w *failWriter) Write(p []byte) (int, error) {
	if w.n -= len(p); w.n < 0 {
		return 0, errors.New("disk full")
	}
	return len(p), nil
}

func TestWriteError(t *testing.T) {
	t.Parallel()
	big := bytes.Repeat(sampleBytes(t), 100) // more than the output buffer
	for _, opts := range []Options{{}, {JSON: true}} {
		_, err := Dump(&failWriter{n: 1000}, sampleName, bytes.NewReader(big), opts)
		if err == nil || !strings.Contains(err.Error(), "disk full") || !strings.HasPrefix(err.Error(), "cannot write dump") {
			t.Fatalf("JSON %v: err = %v", opts.JSON, err)
		}
	}
}

func TestReadError(t *testing.T) {
	t.Parallel()
	r := io.MultiReader(bytes.NewReader(sampleBytes(t)[:100]), iotest.ErrReader(errors.New("bad sector")))
	_, err := Dump(io.Discard, sampleName, bufio.NewReader(r), Options{})
	if err == nil || !strings.Contains(err.Error(), "bad sector") || !strings.Contains(err.Error(), "position 0") {
		t.Fatalf("err = %v", err)
	}
}

func FuzzDump(f *testing.F) {
	sample, err := os.ReadFile(testdata(sampleLog))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(sample)
	f.Add(sample[:len(sample)/2])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, opts := range []Options{{}, {JSON: true, MaxInflate: 1 << 20}} {
			sum, err := Dump(io.Discard, "fuzz.log", bytes.NewReader(data), opts)
			if sum.Bytes > int64(len(data)) || (err == nil) != (sum.Bytes == int64(len(data)) && sum.Corrupt == 0) {
				t.Fatalf("summary %+v, err %v, %d bytes", sum, err, len(data))
			}
		}
	})
}
