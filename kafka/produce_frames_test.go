package kafka

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// frameBytes returns n bytes of a record-batch frame announcing length,
// with magic set where n reaches it (n = 12+length: the whole frame).
func frameBytes(length int32, magic int8, n int) []byte {
	b := make([]byte, n)
	if n >= 12 {
		binary.BigEndian.PutUint32(b[8:], uint32(length))
	}
	if n >= 17 {
		b[16] = byte(magic)
	}
	return b
}

// frameCase is one produce's records for partition 0 of a topic of its
// own and the code Kafka answers.
type frameCase struct {
	name string
	recs []byte
	code int16
}

// produceFrames produces each case and checks its code; with kept, it also
// checks that what was appended is exactly kept (nothing when refused).
func produceFrames(t *testing.T, ts *testServer, prefix string, cases []frameCase, kept []byte) {
	t.Helper()
	rc := dial(t, ts.addr)
	for i, c := range cases {
		topic := prefix + string(rune('a'+i))
		if err := ts.eng.CreateTopic(topic, 1); err != nil {
			t.Fatal(err)
		}
		codes := produceCodes(t, rc, produceReq(topic, map[int32][]byte{0: c.recs}))
		if codes[0] != c.code {
			t.Errorf("%s: code %d (%s), want %d (%s)", c.name, codes[0], kerr.ErrorForCode(codes[0]), c.code, kerr.ErrorForCode(c.code))
			continue
		}
		if kept == nil {
			continue
		}
		p, err := ts.eng.Partition(topic, 0)
		if err != nil {
			t.Fatal(err)
		}
		chunk, err := p.Read(0, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		got := bytes.Clone(chunk.Data)
		chunk.Release()
		switch {
		case c.code != 0 && len(got) != 0:
			t.Errorf("%s: refused, yet %d bytes appended", c.name, len(got))
		case c.code == 0 && !bytes.Equal(got, kept):
			// The log's copy has its base offset stamped (0, as built).
			t.Errorf("%s: log holds %d bytes, want the batch's %d", c.name, len(got), len(kept))
		}
	}
}

// withTail returns good followed by tail.
func withTail(good, tail []byte) []byte { return append(bytes.Clone(good), tail...) }

// TestProducePartialTailTrimmed: bytes after a produce's one batch that
// Kafka's batch iterator takes for a batch cut short (fewer than its
// length field, its magic or the length it announces) are trimmed and the
// batch appended, as UnifiedLog.trimInvalidBytes does; a tail with a
// length below 14 or a magic outside 0-2 is corrupt (CORRUPT_MESSAGE), and
// nothing of that partition is appended.
func TestProducePartialTailTrimmed(t *testing.T) {
	ts := startServer(t, Options{})
	good := buildBatch(t, -1, 0, 0, 2)
	produceFrames(t, ts, "tail-", []frameCase{
		{"5 bytes", withTail(good, frameBytes(0, 0, 5)), 0},
		{"length, no magic", withTail(good, frameBytes(100, 0, 14)), 0},
		{"header, short of the length", withTail(good, frameBytes(100, 2, 40)), 0},
		{"length below 14", withTail(good, frameBytes(13, 2, 20)), kerr.CorruptMessage.Code},
		{"magic 3", withTail(good, frameBytes(100, 3, 20)), kerr.CorruptMessage.Code},
		{"magic -1", withTail(good, frameBytes(100, -1, 20)), kerr.CorruptMessage.Code},
	}, good)
}

// TestProduceCompleteTailCodes: what Kafka answers for bytes after
// a v3+ produce's one batch when those bytes are a complete frame.
// ProduceRequest.validateRecords calls iterator.hasNext() after the first
// batch; ByteBufferLogInputStream.nextBatchSize throws
// CorruptRecordException (CORRUPT_MESSAGE) for a size below
// LegacyRecord.RECORD_OVERHEAD_V0 (14) or a magic outside 0..2, and
// otherwise, the frame being complete, nextBatch returns a second batch
// whatever its size (26..60 bytes included: only ensureValid, which
// validateRecords never reaches, checks it): INVALID_RECORD.
func TestProduceCompleteTailCodes(t *testing.T) {
	ts := startServer(t, Options{})
	good := buildBatch(t, -1, 0, 0, 2)
	whole := func(length int32, magic int8) []byte {
		return withTail(good, frameBytes(length, magic, 12+int(length)))
	}
	produceFrames(t, ts, "tail17-", []frameCase{
		{"complete magic-2 frame of 26 bytes", whole(14, 2), kerr.InvalidRecord.Code},
		{"complete magic-2 frame of 60 bytes", whole(48, 2), kerr.InvalidRecord.Code},
		{"complete magic-1 frame of 40 bytes", whole(28, 1), kerr.InvalidRecord.Code},
		{"complete magic-3 frame of 100 bytes", whole(88, 3), kerr.CorruptMessage.Code},
		{"complete magic -1 frame of 100 bytes", whole(88, -1), kerr.CorruptMessage.Code},
	}, nil)
}

// TestProduceFirstFrameCodes: the same iterator rules applied to
// a produce's first (only) frame. nextBatchSize checks the size field
// (< 14: CORRUPT_MESSAGE) as soon as 12 bytes are there, before it needs
// the 17 up to the magic; a magic outside 0..2 is CORRUPT_MESSAGE even in
// a frame cut short; a frame cut short otherwise is no batch at all,
// which validateRecords refuses with INVALID_RECORD ("must have at least
// one record batch"); a complete frame of magic 0/1 is INVALID_RECORD
// ("only allowed to contain record batches with magic version 2").
func TestProduceFirstFrameCodes(t *testing.T) {
	ts := startServer(t, Options{})
	produceFrames(t, ts, "first17-", []frameCase{
		{"14 bytes, size 5", frameBytes(5, 2, 14), kerr.CorruptMessage.Code},
		{"40 of 112 bytes, magic 3", frameBytes(100, 3, 40), kerr.CorruptMessage.Code},
		{"20 of 32 bytes, magic 2", frameBytes(20, 2, 20), kerr.InvalidRecord.Code},
		{"complete 40-byte frame, magic 1", frameBytes(28, 1, 40), kerr.InvalidRecord.Code},
	}, nil)
}
