package logdump

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/idemlog/idemlog/batch"
)

// cleanedRecord is one record of a cleaned batch, at offset base+delta.
type cleanedRecord struct {
	delta      int32
	ts         int64
	key, value []byte // nil: null
}

// cleanedBatch is a batch as Kafka's cleaner leaves it
// (MemoryRecords.filterTo): the original base offset and last offset
// delta, whatever records survived at their original offsets, producer
// fields kept, and with horizon >= 0 the delete horizon in the base
// timestamp with attribute bit 6 (KIP-534). No records: the empty header
// kept for a producer's state. Uncompressed, CRC sealed.
type cleanedBatch struct {
	base          int64
	lastDelta     int32
	pid           int64
	epoch         int16
	seq           int32
	transactional bool
	control       bool
	horizon       int64
	maxTs         int64
	records       []cleanedRecord
	// raw, if set, is the records section as is (a control record).
	raw []byte
}

func (c cleanedBatch) bytes() []byte {
	var recs []byte
	baseTs := int64(-1)
	if len(c.records) > 0 {
		baseTs = c.records[0].ts
	}
	if c.horizon >= 0 {
		baseTs = c.horizon
	}
	for _, r := range c.records {
		var body []byte
		body = append(body, 0) // attributes
		body = binary.AppendVarint(body, r.ts-baseTs)
		body = binary.AppendVarint(body, int64(r.delta))
		for _, v := range [][]byte{r.key, r.value} {
			if v == nil {
				body = binary.AppendVarint(body, -1)
			} else {
				body = binary.AppendVarint(body, int64(len(v)))
				body = append(body, v...)
			}
		}
		body = binary.AppendVarint(body, 0) // headers
		recs = binary.AppendVarint(recs, int64(len(body)))
		recs = append(recs, body...)
	}
	count := int32(len(c.records))
	if c.raw != nil {
		recs, count = c.raw, 1
	}
	var attrs int16
	if c.transactional {
		attrs |= 0x10
	}
	if c.control {
		attrs |= 0x20
	}
	if c.horizon >= 0 {
		attrs |= 0x40
	}
	b := make([]byte, 61, 61+len(recs))
	be := binary.BigEndian
	be.PutUint64(b[0:], uint64(c.base))
	be.PutUint32(b[8:], uint32(49+len(recs)))
	b[16] = 2
	be.PutUint16(b[21:], uint16(attrs))
	be.PutUint32(b[23:], uint32(c.lastDelta))
	be.PutUint64(b[27:], uint64(baseTs))
	be.PutUint64(b[35:], uint64(c.maxTs))
	be.PutUint64(b[43:], uint64(c.pid))
	be.PutUint16(b[51:], uint16(c.epoch))
	be.PutUint32(b[53:], uint32(c.seq))
	be.PutUint32(b[57:], uint32(count))
	b = append(b, recs...)
	be.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// compactedHorizon is the delete horizon stamped on the tombstone batch.
const compactedHorizon = 1700000999000

// compactedSegment0 is segment 0 of a compacted log after cleaning:
// 0..2 keeps only its record at 1; 3..4 are gone; 5..6 is producer 7's
// last batch, emptied; 7..8 are gone; 9 is a tombstone with its delete
// horizon. It ends at 10.
func compactedSegment0(t testing.TB) []byte {
	t.Helper()
	var seg []byte
	for _, c := range []cleanedBatch{
		{base: 0, lastDelta: 2, pid: -1, epoch: -1, seq: -1, horizon: -1, maxTs: 1001,
			records: []cleanedRecord{{delta: 1, ts: 1001, key: []byte("k1"), value: []byte("v1")}}},
		{base: 5, lastDelta: 1, pid: 7, epoch: 0, seq: 5, horizon: -1, maxTs: 1006},
		{base: 9, lastDelta: 0, pid: -1, epoch: -1, seq: -1, horizon: compactedHorizon, maxTs: 1009,
			records: []cleanedRecord{{delta: 0, ts: 1009, key: []byte("k2")}}},
	} {
		b := c.bytes()
		if _, err := batch.Validate(b, 0); err != nil {
			t.Fatalf("hand-made cleaned batch at %d: %v", c.base, err)
		}
		seg = append(seg, b...)
	}
	return seg
}

// denseSegment is plain one-record batches from offset from to to-1.
func denseSegment(t testing.TB, from, to int64) []byte {
	t.Helper()
	var seg []byte
	for o := from; o < to; o++ {
		seg = append(seg, cleanedBatch{base: o, pid: -1, epoch: -1, seq: -1, horizon: -1, maxTs: 1000 + o,
			records: []cleanedRecord{{ts: 1000 + o, key: []byte("k"), value: []byte("v")}}}.bytes()...)
	}
	return seg
}

func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDumpCompactedSegment: the dump of a cleaned segment marks the gaps
// before batches (from the segment's base for the first), the emptied
// batch and the delete horizon, in text and JSON, and passes.
func TestDumpCompactedSegment(t *testing.T) {
	path := filepath.Join(t.TempDir(), "00000000000000000000.log")
	writeFile(t, path, compactedSegment0(t))
	var out bytes.Buffer
	sum, err := DumpFile(&out, path, Options{})
	if err != nil {
		t.Fatalf("dump of a cleaned segment: %v\n%s", err, out.String())
	}
	if sum.Gaps != 4 || sum.Emptied != 1 || sum.NextOffset != 10 {
		t.Errorf("summary %+v: want 4 offsets in gaps, 1 emptied batch, next offset 10", sum)
	}
	lines := strings.Split(out.String(), "\n")
	want := []struct{ prefix, has, hasNot string }{
		{"baseOffset: 0 ", "", "gapBefore"},
		{"| offset: 1 ", "key: k1", ""},
		{"baseOffset: 5 ", " gapBefore: 2 emptied: true", "deleteHorizonMs"},
		{"baseOffset: 9 ", " gapBefore: 2", "emptied"},
	}
	i := 0
	for _, l := range lines {
		if i < len(want) && strings.HasPrefix(l, want[i].prefix) {
			if want[i].has != "" && !strings.Contains(l, want[i].has) || want[i].hasNot != "" && strings.Contains(l, want[i].hasNot) {
				t.Errorf("line %q: want %q in it and not %q", l, want[i].has, want[i].hasNot)
			}
			i++
		}
	}
	if i != len(want) {
		t.Fatalf("found %d of %d expected lines in\n%s", i, len(want), out.String())
	}
	if !strings.Contains(out.String(), "deleteHorizonMs: 1700000999000") || !strings.Contains(out.String(), "4 offsets in gaps, 1 emptied batch") {
		t.Errorf("no delete horizon or gap summary in\n%s", out.String())
	}

	out.Reset()
	if _, err := DumpFile(&out, path, Options{JSON: true}); err != nil {
		t.Fatal(err)
	}
	var got []jsonBatch
	for l := range strings.Lines(out.String()) {
		var b jsonBatch
		if err := json.Unmarshal([]byte(l), &b); err != nil {
			t.Fatal(err)
		}
		got = append(got, b)
	}
	if len(got) != 3 {
		t.Fatalf("%d JSON lines, want 3\n%s", len(got), out.String())
	}
	for i, w := range []struct {
		gap     int64
		emptied bool
		horizon int64
		recs    int
	}{{0, false, -1, 1}, {2, true, -1, 0}, {2, false, compactedHorizon, 1}} {
		g := got[i]
		if g.GapBefore != w.gap || g.Emptied != w.emptied || g.DeleteHorizonMs != w.horizon || len(g.Records) != w.recs {
			t.Errorf("batch %d: gapBefore %d emptied %v deleteHorizonMs %d records %d, want %+v", i, g.GapBefore, g.Emptied, g.DeleteHorizonMs, len(g.Records), w)
		}
	}
}

// TestDumpCompactedPartitionGaps: in a partition directory, a segment's
// gap counts from where the previous segment's last batch ended (the
// cleaner empties segment tails too), and a batch that overlaps the one
// before shows a negative gap.
func TestDumpCompactedPartitionGaps(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "00000000000000000000.log"), compactedSegment0(t))
	writeFile(t, filepath.Join(dir, "00000000000000000015.log"), nil) // emptied by cleaning
	writeFile(t, filepath.Join(dir, "00000000000000000020.log"), append(denseSegment(t, 20, 22), denseSegment(t, 21, 22)...))
	var out bytes.Buffer
	if err := DumpPath(&out, dir, Options{JSON: true}); err != nil {
		t.Fatalf("dump: %v\n%s", err, out.String())
	}
	var gaps []int64
	for l := range strings.Lines(out.String()) {
		var b jsonBatch
		if err := json.Unmarshal([]byte(l), &b); err != nil {
			t.Fatal(err)
		}
		gaps = append(gaps, b.GapBefore)
	}
	if want := []int64{0, 2, 2, 10, 0, -1}; !slices.Equal(gaps, want) {
		t.Errorf("gapBefore %v, want %v", gaps, want)
	}
}
