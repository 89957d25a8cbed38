package interop

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// cliDir holds the idemlog binary, built once by the first test that needs
// it so the other tests still run if the CLI does not build.
var (
	cliDir  string
	cliOnce sync.Once
	cliPath string
	cliErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if cliDir != "" {
		os.RemoveAll(cliDir)
	}
	os.Exit(code)
}

// idemlogCLI builds the CLI from the main module with its own go.mod, so
// the binary under test is exactly what the engine ships and this module
// need not track the CLI's dependencies.
func idemlogCLI(t *testing.T) string {
	t.Helper()
	cliOnce.Do(func() {
		if cliDir, cliErr = os.MkdirTemp("", "idemlog-cli-"); cliErr != nil {
			return
		}
		cliPath = filepath.Join(cliDir, "idemlog")
		cmd := exec.Command("go", "build", "-C", "..", "-o", cliPath, "./cmd/idemlog")
		if out, err := cmd.CombinedOutput(); err != nil {
			cliErr = fmt.Errorf("go build ./cmd/idemlog: %v\n%s", err, out)
		}
	})
	if cliErr != nil {
		t.Fatal(cliErr)
	}
	return cliPath
}

// The CLI's JSON, decoded so that null and "" stay apart: bytes fields are
// kept raw and converted by jsonBytes.
type dumpBatch struct {
	BaseOffset      int64        `json:"baseOffset"`
	LastOffset      int64        `json:"lastOffset"`
	ProducerID      int64        `json:"producerId"`
	ProducerEpoch   int16        `json:"producerEpoch"`
	BaseSequence    int32        `json:"baseSequence"`
	IsTransactional bool         `json:"isTransactional"`
	IsControl       bool         `json:"isControl"`
	Compression     string       `json:"compression"`
	CRCValid        bool         `json:"crcValid"`
	DeleteHorizonMs int64        `json:"deleteHorizonMs"`
	GapBefore       int64        `json:"gapBefore"`
	Emptied         bool         `json:"emptied"`
	Records         []dumpRecord `json:"records"`
}

type dumpRecord struct {
	Offset    int64           `json:"offset"`
	Timestamp int64           `json:"timestamp"`
	Key       json.RawMessage `json:"key"`
	Value     json.RawMessage `json:"value"`
	Headers   []dumpHeader    `json:"headers"`
}

type dumpHeader struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

var (
	batchKeys  = []string{"baseOffset", "lastOffset", "producerId", "producerEpoch", "baseSequence", "isTransactional", "isControl", "compression", "crcValid", "deleteHorizonMs", "gapBefore", "emptied", "records"}
	recordKeys = []string{"offset", "timestamp", "key", "value", "headers"}
	headerKeys = []string{"key", "value"}
	codecNames = []string{"none", "gzip", "snappy", "lz4", "zstd"}
)

// jsonBytes maps null to nil and a base64 string (possibly "") to a non-nil
// slice; anything else is an error, so a missing field (RawMessage nil) is
// caught too.
func jsonBytes(raw json.RawMessage) ([]byte, error) {
	if string(raw) == "null" {
		return nil, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("not null or a string: %q", raw)
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("not base64: %q", s)
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}

// objectKeys returns the keys of every object in a JSON value, grouped by
// nesting depth of object, in order of appearance: [batch keys, record 0
// keys, header 0.0 keys, ...]. It is how the fixed field order is checked.
func objectKeys(line []byte) ([][]string, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	type frame struct {
		obj    bool
		idx    int
		expect bool // next string token in an object is a key
	}
	var (
		stack []frame
		out   [][]string
	)
	for {
		tok, err := dec.Token()
		if err != nil {
			if err == io.EOF {
				return out, nil
			}
			return nil, err
		}
		top := len(stack) - 1
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				if top >= 0 && stack[top].obj {
					stack[top].expect = true
				}
				out = append(out, nil)
				stack = append(stack, frame{obj: true, idx: len(out) - 1, expect: true})
				continue
			case '[':
				if top >= 0 && stack[top].obj {
					stack[top].expect = true
				}
				stack = append(stack, frame{})
				continue
			default:
				stack = stack[:top]
				if top-1 >= 0 && stack[top-1].obj {
					stack[top-1].expect = true
				}
				continue
			}
		case string:
			if top >= 0 && stack[top].obj && stack[top].expect {
				out[stack[top].idx] = append(out[stack[top].idx], v)
				stack[top].expect = false
				continue
			}
		}
		if top >= 0 && stack[top].obj {
			stack[top].expect = true
		}
	}
}

// stamp re-encodes a producer batch through kmsg with the offset and leader
// epoch a partition leader assigns. Neither is under the CRC, so the CRC
// franz-go computed for offset 0 must stay valid.
func stamp(t *testing.T, raw []byte, base int64, leaderEpoch int32) []byte {
	t.Helper()
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(raw); err != nil {
		t.Fatal(err)
	}
	rb.FirstOffset, rb.PartitionLeaderEpoch = base, leaderEpoch
	return rb.AppendTo(nil)
}

// dumpSegment writes a segment of franz-go batches, every codec and both
// marker types included, with dense offsets from 0.
func dumpSegment(t *testing.T) [][]byte {
	const ts = 1_700_000_000_000
	cases := map[string]spec{}
	for _, c := range fixedCases() {
		cases[c.name] = c.spec
	}
	big := bytes.Repeat([]byte("compressible value "), (3<<20)/19) // >= 1 MiB, inflates past max batch size
	specs := []spec{
		cases["null-empty"],
		cases["headers"],
		withProducer(cases["null-empty"], 77, 4, 0, true),
		withProducer(plain(cases["many-records"].Records[:300]...), 77, 4, 6, true),
		plain(rec{TS: ts, Key: []byte("big"), Value: big}, rec{TS: ts - 3, Value: []byte{}}),
		cases["timestamps"],
		withProducer(cases["headers"], 78, 0, 2147483646, false),
	}
	for i := range specs {
		specs[i].Codec = allCodecs[i%len(allCodecs)]
	}
	var (
		out  [][]byte
		next int64
	)
	add := func(raw []byte) {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(raw); err != nil {
			t.Fatal(err)
		}
		out = append(out, stamp(t, raw, next, 5))
		next += int64(rb.LastOffsetDelta) + 1
	}
	for i, s := range specs {
		add(franzBuild(t, s))
		switch i {
		case 3:
			add(franzControl(0, 77, 4, 1, 9, ts+50, 0x30)) // COMMIT
		case 4:
			add(franzControl(0, 78, 0, 0, 9, ts+60, 0x30)) // ABORT (no data of its own)
		}
	}
	return out
}

// expectDump is franz-go's reading of one batch in the CLI's JSON shape.
func expectDump(t *testing.T, raw []byte) dumpBatch {
	t.Helper()
	fb := franzDecode(t, raw)
	want := dumpBatch{
		BaseOffset:      fb.FirstOffset,
		LastOffset:      fb.FirstOffset + int64(fb.LastOffsetDelta),
		ProducerID:      fb.ProducerID,
		ProducerEpoch:   fb.ProducerEpoch,
		BaseSequence:    fb.FirstSequence,
		IsTransactional: fb.Attributes&0x10 != 0,
		IsControl:       fb.Attributes&0x20 != 0,
		Compression:     codecNames[fb.Attributes&7],
		CRCValid:        true,
		DeleteHorizonMs: -1,
		Emptied:         fb.NumRecords == 0,
	}
	if fb.Attributes&0x40 != 0 { // KIP-534's delete horizon, in the first timestamp
		want.DeleteHorizonMs = fb.FirstTimestamp
	}
	enc := func(b []byte) json.RawMessage { m, _ := json.Marshal(b); return m }
	for _, kr := range fb.Records {
		r := dumpRecord{
			Offset:    fb.FirstOffset + int64(kr.OffsetDelta),
			Timestamp: fb.FirstTimestamp + kr.TimestampDelta64,
			Key:       enc(kr.Key),
			Value:     enc(kr.Value),
		}
		for _, h := range kr.Headers {
			r.Headers = append(r.Headers, dumpHeader{Key: h.Key, Value: enc(h.Value)})
		}
		want.Records = append(want.Records, r)
	}
	return want
}

// diffDump compares field by field, bytes fields by their decoded value with
// null and "" apart.
func diffDump(got, want dumpBatch) string {
	g, w := got, want
	g.Records, w.Records = nil, nil
	if !reflect.DeepEqual(g, w) {
		return fmt.Sprintf("batch fields %+v, want %+v", g, w)
	}
	if len(got.Records) != len(want.Records) {
		return fmt.Sprintf("%d records, want %d", len(got.Records), len(want.Records))
	}
	for i, gr := range got.Records {
		wr := want.Records[i]
		if gr.Offset != wr.Offset || gr.Timestamp != wr.Timestamp {
			return fmt.Sprintf("record %d offset/timestamp %d/%d, want %d/%d", i, gr.Offset, gr.Timestamp, wr.Offset, wr.Timestamp)
		}
		for _, f := range [][3]any{{"key", gr.Key, wr.Key}, {"value", gr.Value, wr.Value}} {
			gb, err := jsonBytes(f[1].(json.RawMessage))
			if err != nil {
				return fmt.Sprintf("record %d %s: %v", i, f[0], err)
			}
			wb, _ := jsonBytes(f[2].(json.RawMessage))
			if !sameBytes(gb, wb) {
				return fmt.Sprintf("record %d %s %s, want %s", i, f[0], showBytes(gb), showBytes(wb))
			}
		}
		if gr.Headers == nil || len(gr.Headers) != len(wr.Headers) {
			return fmt.Sprintf("record %d headers %v, want %d", i, gr.Headers, len(wr.Headers))
		}
		for j, gh := range gr.Headers {
			gv, err := jsonBytes(gh.Value)
			if err != nil {
				return fmt.Sprintf("record %d header %d value: %v", i, j, err)
			}
			wv, _ := jsonBytes(wr.Headers[j].Value)
			if gh.Key != wr.Headers[j].Key || !sameBytes(gv, wv) {
				return fmt.Sprintf("record %d header %d %q:%s, want %q:%s", i, j, gh.Key, showBytes(gv), wr.Headers[j].Key, showBytes(wv))
			}
		}
	}
	return ""
}

func runDump(t *testing.T, file string) (lines [][]byte, stderr string, err error) {
	t.Helper()
	cmd := exec.Command(idemlogCLI(t), "dump", "--json", file)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	for line := range bytes.Lines(out.Bytes()) {
		lines = append(lines, line)
	}
	return lines, errb.String(), err
}

// checkLine decodes one output line strictly (no unknown fields, fixed key
// order, "records" and "headers" as arrays) and compares it with want.
func checkLine(t *testing.T, i int, line []byte, want dumpBatch) {
	t.Helper()
	if !bytes.HasSuffix(line, []byte("\n")) || bytes.Count(line, []byte("\n")) != 1 {
		t.Errorf("batch %d: not exactly one line: %q", i, line)
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	var got dumpBatch
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("batch %d: %v: %s", i, err, line)
	}
	if got.Records == nil {
		t.Errorf("batch %d: records is not an array: %s", i, line)
	}
	if diff := diffDump(got, want); diff != "" {
		t.Errorf("batch %d: %s", i, diff)
	}
	keys, err := objectKeys(line)
	if err != nil {
		t.Fatalf("batch %d: %v", i, err)
	}
	wantKeys := [][]string{batchKeys}
	for _, r := range want.Records {
		wantKeys = append(wantKeys, recordKeys)
		for range r.Headers {
			wantKeys = append(wantKeys, headerKeys)
		}
	}
	if !slices.EqualFunc(keys, wantKeys, slices.Equal) {
		t.Errorf("batch %d: object keys/order %v, want %v", i, keys, wantKeys)
	}
}

// TestDumpGolden runs `idemlog dump --json` on a segment franz-go wrote and
// checks every line against franz-go's own reading of the same bytes.
func TestDumpGolden(t *testing.T) {
	batches := dumpSegment(t)
	file := filepath.Join(t.TempDir(), "00000000000000000000.log")
	if err := os.WriteFile(file, bytes.Join(batches, nil), 0o644); err != nil {
		t.Fatal(err)
	}
	lines, stderr, err := runDump(t, file)
	if err != nil {
		t.Fatalf("idemlog dump --json: %v\n%s", err, stderr)
	}
	if len(lines) != len(batches) {
		t.Fatalf("%d output lines for %d batches\n%s", len(lines), len(batches), stderr)
	}
	seen := map[string]bool{}
	next := int64(0) // the file's base, from its name
	for i, raw := range batches {
		want := expectDump(t, raw)
		want.GapBefore, next = want.BaseOffset-next, want.LastOffset+1
		seen[want.Compression] = true
		checkLine(t, i, lines[i], want)
	}
	if len(seen) != len(codecNames) {
		t.Fatalf("segment covers codecs %v, want all", seen)
	}
}

// TestDumpCorruptCRC: a flipped bit in a value must show as crcValid false
// with the records still printed (they decode), and fail the command.
func TestDumpCorruptCRC(t *testing.T) {
	raw := franzBuild(t, plain(rec{TS: 1, Key: []byte("k"), Value: []byte("value")}))
	good := stamp(t, raw, 0, 0)
	bad := stamp(t, raw, 1, 0)
	bad[len(bad)-3] ^= 0x01 // inside "value", which ends before the header count
	file := filepath.Join(t.TempDir(), "00000000000000000000.log")
	if err := os.WriteFile(file, append(bytes.Clone(good), bad...), 0o644); err != nil {
		t.Fatal(err)
	}
	lines, stderr, err := runDump(t, file)
	// The CLI documents exit status 1 for corrupt data, 2 for misuse.
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("idemlog dump of a corrupt segment: %v, want exit status 1\n%s", err, stderr)
	}
	if len(lines) != 2 {
		t.Fatalf("%d output lines for 2 batches\n%s", len(lines), stderr)
	}
	checkLine(t, 0, lines[0], expectDump(t, good))
	// franzDecode would refuse the bad CRC; build the expectation from the
	// intact batch and the flipped byte instead.
	want := expectDump(t, stamp(t, raw, 1, 0))
	want.CRCValid = false
	want.Records[0].Value, _ = json.Marshal(bad[len(bad)-6 : len(bad)-1])
	checkLine(t, 1, lines[1], want)
}
