package kafka

import (
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestReview17ProduceCompleteTailCodes: what Kafka answers for bytes after
// a v3+ produce's one batch when those bytes are a complete frame.
// ProduceRequest.validateRecords calls iterator.hasNext() after the first
// batch; ByteBufferLogInputStream.nextBatchSize throws
// CorruptRecordException (CORRUPT_MESSAGE) for a size below
// LegacyRecord.RECORD_OVERHEAD_V0 (14) or a magic outside 0..2, and
// otherwise, the frame being complete, nextBatch returns a second batch
// whatever its size: validateRecords throws InvalidRecordException
// ("exactly one record batch per partition"), INVALID_RECORD.
func TestReview17ProduceCompleteTailCodes(t *testing.T) {
	ts := startServer(t, Options{})
	good := buildBatch(t, -1, 0, 0, 2)
	// frame is a complete frame of 12+length bytes with the given magic.
	frame := func(length int32, magic int8) []byte {
		b := make([]byte, 12+int(length))
		binary.BigEndian.PutUint32(b[8:], uint32(length))
		b[16] = byte(magic)
		return b
	}
	cases := []struct {
		name string
		tail []byte
		code int16
	}{
		// A complete frame Kafka's iterator accepts as a (second) batch:
		// its size (26..60 bytes) is only checked by ensureValid, which
		// validateRecords never reaches.
		{"complete magic-2 frame of 26 bytes", frame(14, 2), kerr.InvalidRecord.Code},
		{"complete magic-2 frame of 60 bytes", frame(48, 2), kerr.InvalidRecord.Code},
		{"complete magic-1 frame of 40 bytes", frame(28, 1), kerr.InvalidRecord.Code},
		// A complete frame whose magic Kafka's iterator refuses: it throws
		// before any batch is returned, CORRUPT_MESSAGE.
		{"complete magic-3 frame of 100 bytes", frame(88, 3), kerr.CorruptMessage.Code},
		{"complete magic -1 frame of 100 bytes", frame(88, -1), kerr.CorruptMessage.Code},
	}
	rc := dial(t, ts.addr)
	for i, c := range cases {
		topic := "tail17-" + string(rune('a'+i))
		if err := ts.eng.CreateTopic(topic, 1); err != nil {
			t.Fatal(err)
		}
		records := append(append([]byte(nil), good...), c.tail...)
		codes := review10Codes(t, rc, produceReq(topic, map[int32][]byte{0: records}))
		if codes[0] != c.code {
			t.Errorf("%s: code %d (%s), want %d (%s)", c.name, codes[0], kerr.ErrorForCode(codes[0]).(*kerr.Error).Message, c.code, kerr.ErrorForCode(c.code).(*kerr.Error).Message)
		}
	}
}

// TestReview17ProduceFirstFrameCodes: the same iterator rules applied to
// a produce's first (only) frame. ByteBufferLogInputStream.nextBatchSize
// checks the size field (< 14: CORRUPT_MESSAGE) as soon as 12 bytes are
// there, before it needs the 17 up to the magic; a magic outside 0..2 is
// CORRUPT_MESSAGE even in a frame cut short; a frame cut short otherwise
// is no batch at all, which validateRecords refuses with
// INVALID_RECORD ("must have at least one record batch") whatever its
// announced size; a complete frame of magic 0/1 is INVALID_RECORD
// ("only allowed to contain record batches with magic version 2")
// whatever its size.
func TestReview17ProduceFirstFrameCodes(t *testing.T) {
	ts := startServer(t, Options{})
	// frame is n bytes of a frame announcing length, with the magic set
	// when n reaches it.
	frame := func(length int32, magic int8, n int) []byte {
		b := make([]byte, n)
		binary.BigEndian.PutUint32(b[8:], uint32(length))
		if n > 16 {
			b[16] = byte(magic)
		}
		return b
	}
	cases := []struct {
		name string
		recs []byte
		code int16
	}{
		{"14 bytes, size 5", frame(5, 2, 14), kerr.CorruptMessage.Code},
		{"40 of 112 bytes, magic 3", frame(100, 3, 40), kerr.CorruptMessage.Code},
		{"20 of 32 bytes, magic 2", frame(20, 2, 20), kerr.InvalidRecord.Code},
		{"complete 40-byte frame, magic 1", frame(28, 1, 40), kerr.InvalidRecord.Code},
	}
	rc := dial(t, ts.addr)
	for i, c := range cases {
		topic := "first17-" + string(rune('a'+i))
		if err := ts.eng.CreateTopic(topic, 1); err != nil {
			t.Fatal(err)
		}
		codes := review10Codes(t, rc, produceReq(topic, map[int32][]byte{0: c.recs}))
		if codes[0] != c.code {
			t.Errorf("%s: code %d (%s), want %d (%s)", c.name, codes[0], kerr.ErrorForCode(codes[0]).(*kerr.Error).Message, c.code, kerr.ErrorForCode(c.code).(*kerr.Error).Message)
		}
	}
}
