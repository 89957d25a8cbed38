package logdump

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemlog/idemlog/batch"
)

var update = flag.Bool("update", false, "rewrite testdata/sample.log and the golden dumps")

const (
	sampleLog  = "sample.log"
	goldenJSON = "sample.dump.json"
	goldenText = "sample.dump.txt"
	// sampleName is the name the goldens print: the path from the
	// repository root, as `idemlog dump testdata/sample.log` shows it.
	sampleName = "testdata/sample.log"
	baseTS     = int64(1700000000000)
)

func testdata(name string) string { return filepath.Join("..", "testdata", name) }

type sampleRecord struct {
	key, value []byte
	headers    []batch.Header
}

func s(v string) []byte { return []byte(v) }

// buildSample returns the sample segment: one batch per codec, idempotent
// and transactional batches with their markers, and records covering null
// and empty keys and values and headers, with offsets stamped densely from
// 0 as a leader would. Everything in it is fixed, so it is deterministic.
func buildSample(t testing.TB) []byte {
	t.Helper()
	var seg []byte
	var next int64
	ts := baseTS
	stamp := func(start int) {
		b := batch.Batch(seg[start:])
		b.SetBaseOffset(next)
		b.SetPartitionLeaderEpoch(0)
		next = b.NextOffset()
	}
	bld := batch.NewBuilder(batch.CodecNone)
	add := func(codec batch.Codec, pid int64, epoch int16, seq int32, txn bool, recs []sampleRecord) {
		bld.Reset(codec)
		if pid >= 0 {
			bld.SetProducer(pid, epoch, seq)
		}
		bld.SetTransactional(txn)
		for _, r := range recs {
			bld.Append(ts, r.key, r.value, r.headers)
			ts += 7
		}
		b, err := bld.Build()
		if err != nil {
			t.Fatalf("cannot build sample batch: %v", err)
		}
		start := len(seg)
		seg = append(seg, b...)
		stamp(start)
	}
	marker := func(typ batch.ControlType, pid int64, epoch int16) {
		start := len(seg)
		seg = batch.AppendMarker(seg, batch.Marker{
			Type: typ, ProducerID: pid, ProducerEpoch: epoch, CoordinatorEpoch: 3, Timestamp: ts,
		})
		ts += 7
		stamp(start)
	}
	json := []byte("application/json")

	add(batch.CodecNone, -1, -1, -1, false, []sampleRecord{
		{key: s("k1"), value: s("hello"), headers: []batch.Header{{Key: s("a"), Value: s("1")}, {Key: s("b"), Value: nil}}},
		{key: nil, value: s("null key")},
		{key: []byte{}, value: []byte{}},
		{key: s("tombstone"), value: nil},
	})
	add(batch.CodecGzip, 1000, 0, 0, false, []sampleRecord{
		{key: s("order-1"), value: s(`{"id":1,"item":"book","qty":2}`), headers: []batch.Header{{Key: s("content-type"), Value: json}}},
		{key: s("order-2"), value: s(`{"id":2,"item":"lamp","qty":1}`), headers: []batch.Header{{Key: s("content-type"), Value: json}}},
		{key: s("order-3"), value: s(`{"id":3,"item":"desk","qty":1}`), headers: []batch.Header{{Key: s("content-type"), Value: json}}},
	})
	add(batch.CodecSnappy, 1000, 0, 3, false, []sampleRecord{
		{key: s("order-4"), value: s(`{"id":4,"item":"pen","qty":10}`)},
		{key: s("order-5"), value: s(`{"id":5,"item":"ink","qty":3}`)},
	})
	add(batch.CodecLZ4, 2000, 5, 0, false, []sampleRecord{
		{key: []byte{0x00, 0xff, 0x10, '\n'}, value: s("binary key")},
		{key: s("unicode"), value: s("héllo wörld ✓")},
		{key: s("empty header"), value: s("x"), headers: []batch.Header{{Key: []byte{}, Value: []byte{}}}},
	})
	var logs []sampleRecord
	for i := range 12 {
		logs = append(logs, sampleRecord{
			key:   s(fmt.Sprintf("host-%d", i%3)),
			value: s(fmt.Sprintf("2023-11-14T22:13:%02dZ INFO request served path=/api/v1/items/%d status=200 bytes=%d", 20+i, i, 100*i)),
		})
	}
	add(batch.CodecZstd, 2000, 5, 3, false, logs)
	add(batch.CodecNone, 3000, 1, 0, true, []sampleRecord{
		{key: s("acct-7"), value: s("debit 40")},
		{key: s("acct-9"), value: s("credit 40")},
	})
	marker(batch.ControlCommit, 3000, 1)
	add(batch.CodecGzip, 3001, 0, 0, true, []sampleRecord{
		{key: s("acct-7"), value: s("debit 99")},
		{key: s("acct-8"), value: s("credit 99"), headers: []batch.Header{{Key: s("retry"), Value: s("1")}}},
	})
	marker(batch.ControlAbort, 3001, 0)
	add(batch.CodecNone, 1000, 0, 5, false, []sampleRecord{
		{key: s("order-6"), value: s(`{"id":6,"item":"<cup> & saucer","qty":4}`)},
	})
	return seg
}

// sampleBytes is the sample the goldens are checked against: the committed
// file, or under -update the freshly generated one, so that one
// `go test -update` run rewrites everything consistently whatever order the
// tests run in.
func sampleBytes(t testing.TB) []byte {
	t.Helper()
	if *update {
		return buildSample(t)
	}
	data, err := os.ReadFile(testdata(sampleLog))
	if err != nil {
		t.Fatalf("cannot read sample (regenerate with go test ./logdump -run TestGenerateSample -update): %v", err)
	}
	return data
}

func dumpString(t testing.TB, data []byte, opts Options) (string, Summary, error) {
	t.Helper()
	var out bytes.Buffer
	sum, err := Dump(&out, sampleName, bytes.NewReader(data), opts)
	return out.String(), sum, err
}

// TestGenerateSample rewrites testdata/sample.log under -update. Without it,
// it checks that the generator is deterministic and still describes the
// committed file: the bytes of compressed batches may legitimately differ
// between compressor versions, so the comparison is on the decoded JSON.
func TestGenerateSample(t *testing.T) {
	t.Parallel()
	a, b := buildSample(t), buildSample(t)
	if !bytes.Equal(a, b) {
		t.Fatal("sample generation is not deterministic")
	}
	if *update {
		if err := os.WriteFile(testdata(sampleLog), a, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	gen, _, err := dumpString(t, a, Options{JSON: true})
	if err != nil {
		t.Fatalf("dump of generated sample: %v", err)
	}
	committed, _, err := dumpString(t, sampleBytes(t), Options{JSON: true})
	if err != nil {
		t.Fatalf("dump of committed sample: %v", err)
	}
	if gen != committed {
		t.Fatalf("testdata/sample.log is out of date with buildSample; run go test ./logdump -update\ngenerated:\n%s\ncommitted:\n%s", gen, committed)
	}
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := testdata(name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("cannot read golden (regenerate with go test ./logdump -update): %v", err)
	}
	if got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("%s differs at line %d (run go test ./logdump -update if intended):\ngot:  %s\nwant: %s", name, i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("%s differs in length: got %d lines, want %d", name, len(gl), len(wl))
	}
}
