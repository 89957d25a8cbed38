package kafka

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestProducePartialTailTrimmed: bytes after a produce's one batch that
// Kafka's batch iterator takes for a batch cut short (fewer than its
// length field, its magic or the length it announces) are trimmed and the
// batch appended, as UnifiedLog.trimInvalidBytes does; a tail with a
// length below 14 or a magic above 2 is corrupt (CORRUPT_MESSAGE), and
// nothing of that partition is appended.
func TestProducePartialTailTrimmed(t *testing.T) {
	ts := startServer(t, Options{})
	good := buildBatch(t, -1, 0, 0, 2)
	tail := func(length int32, magic int8, n int) []byte {
		b := make([]byte, n)
		if n >= 12 {
			binary.BigEndian.PutUint32(b[8:], uint32(length))
		}
		if n >= 17 {
			b[16] = byte(magic)
		}
		return b
	}
	cases := []struct {
		name string
		tail []byte
		code int16
	}{
		{"5 bytes", tail(0, 0, 5), 0},
		{"length, no magic", tail(100, 0, 14), 0},
		{"header, short of the length", tail(100, 2, 40), 0},
		{"length below 14", tail(13, 2, 20), kerr.CorruptMessage.Code},
		{"magic 3", tail(100, 3, 20), kerr.CorruptMessage.Code},
		{"magic -1", tail(100, -1, 20), kerr.CorruptMessage.Code},
	}
	rc := dial(t, ts.addr)
	for i, c := range cases {
		topic := "tail-" + string(rune('a'+i))
		if err := ts.eng.CreateTopic(topic, 1); err != nil {
			t.Fatal(err)
		}
		records := append(append([]byte(nil), good...), c.tail...)
		codes := review10Codes(t, rc, produceReq(topic, map[int32][]byte{0: records}))
		if codes[0] != c.code {
			t.Errorf("%s: code %d, want %d", c.name, codes[0], c.code)
			continue
		}
		p, err := ts.eng.Partition(topic, 0)
		if err != nil {
			t.Fatal(err)
		}
		chunk, err := p.Log().Read(0, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		got := append([]byte(nil), chunk.Data...)
		chunk.Release()
		if c.code != 0 {
			if len(got) != 0 {
				t.Errorf("%s: refused, yet %d bytes appended", c.name, len(got))
			}
			continue
		}
		// The log's copy has its base offset stamped (0 here, as built).
		if !bytes.Equal(got, good) {
			t.Errorf("%s: log holds %d bytes, want the batch's %d", c.name, len(got), len(good))
		}
	}
}
