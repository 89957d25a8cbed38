package engine

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/idemlog/idemlog/batch"
)

// records decodes a batch's records as (timestamp, key, value, headers).
func records(t *testing.T, v batch.Batch) []string {
	t.Helper()
	var d batch.Decoder
	recs, err := d.Records(v)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	var r batch.Record
	for recs.Next(&r) {
		s := fmt.Sprintf("%d %q %q", r.Timestamp, r.Key, r.Value)
		it := r.Headers()
		var h batch.Header
		for it.Next(&h) {
			s += fmt.Sprintf(" %q=%q", h.Key, h.Value)
		}
		out = append(out, s)
	}
	if err := recs.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func buildIn(t *testing.T, codec batch.Codec, pid int64, seq int32) []byte {
	t.Helper()
	b := batch.NewBuilder(codec)
	b.SetProducer(pid, 0, seq)
	for i := range 20 {
		b.Append(int64(1000+i), []byte(fmt.Sprint("k", i)), bytes.Repeat([]byte("value "), 20),
			[]batch.Header{{Key: []byte("h"), Value: []byte(fmt.Sprint(i))}})
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Clone(out)
}

// TestTopicCompression: compression.type stores every batch in the
// topic's codec, keeping the producer fields and every record; a batch
// already in that codec is stored as sent; "producer" keeps the
// producer's codec; a retry of a rebuilt batch is deduplicated.
func TestTopicCompression(t *testing.T) {
	t.Parallel()
	e := openEngine(t, t.TempDir(), Options{})
	defer e.Close()
	for topic, ct := range map[string]string{"gz": "gzip", "none": "uncompressed", "prod": "producer", "zs": "zstd"} {
		if err := e.CreateTopic(topic, 1, map[string]string{"compression.type": ct, "compression.zstd.level": "9"}); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		topic string
		in    batch.Codec
		want  batch.Codec
	}{
		{"gz", batch.CodecNone, batch.CodecGzip},
		{"gz", batch.CodecLZ4, batch.CodecGzip},
		{"gz", batch.CodecGzip, batch.CodecGzip},
		{"none", batch.CodecZstd, batch.CodecNone},
		{"prod", batch.CodecSnappy, batch.CodecSnappy},
		{"zs", batch.CodecNone, batch.CodecZstd},
	}
	for i, c := range cases {
		p, _ := e.Partition(c.topic, 0)
		pid := int64(100 + i)
		sent := buildIn(t, c.in, pid, 0)
		res, err := p.Append(sent)
		if err != nil {
			t.Fatalf("%s from %v: %v", c.topic, c.in, err)
		}
		got := firstBatch(t, p, res.BaseOffset)
		if got.Codec() != c.want || got.ProducerID() != pid || got.ProducerEpoch() != 0 || got.BaseSequence() != 0 ||
			got.RecordsCount() != 20 || got.LastOffsetDelta() != 19 || got.MaxTimestamp() != 1019 {
			t.Fatalf("%s from %v: stored %v pid %d seq %d n %d max %d", c.topic, c.in, got.Codec(), got.ProducerID(),
				got.BaseSequence(), got.RecordsCount(), got.MaxTimestamp())
		}
		if want, have := records(t, batch.Batch(sent)), records(t, got); fmt.Sprint(want) != fmt.Sprint(have) {
			t.Fatalf("%s from %v: records %v, want %v", c.topic, c.in, have, want)
		}
		if c.in == c.want && !bytes.Equal(got.Records(), batch.Batch(sent).Records()) {
			t.Fatalf("%s: a batch already in the topic's codec was re-encoded", c.topic)
		}
		if dup, err := p.Append(sent); err != nil || !dup.Duplicate || dup.BaseOffset != res.BaseOffset {
			t.Fatalf("%s: retry %+v, %v", c.topic, dup, err)
		}
	}
	// Rebuilt larger than max.message.bytes: refused, nothing written.
	if err := e.CreateTopic("small", 1, map[string]string{"compression.type": "uncompressed", "max.message.bytes": "1000"}); err != nil {
		t.Fatal(err)
	}
	p, _ := e.Partition("small", 0)
	gz := buildIn(t, batch.CodecGzip, 7, 0)
	if len(gz) > 1000 {
		t.Fatalf("the gzip batch is %d bytes", len(gz))
	}
	if _, err := p.Append(gz); !errors.Is(err, batch.ErrTooLarge) || p.log.HighWatermark() != 0 {
		t.Fatalf("rebuilt over max.message.bytes: %v (high watermark %d)", err, p.log.HighWatermark())
	}
}

// TestCompactedTopicKeys: a compacted topic refuses a batch with a record
// that has no key (INVALID_RECORD), writing nothing; a delete topic takes
// it.
func TestCompactedTopicKeys(t *testing.T) {
	t.Parallel()
	e := openEngine(t, t.TempDir(), Options{})
	defer e.Close()
	if err := e.CreateTopic("c", 1, map[string]string{"cleanup.policy": "compact,delete"}); err != nil {
		t.Fatal(err)
	}
	if err := e.CreateTopic("d", 1); err != nil {
		t.Fatal(err)
	}
	b := batch.NewBuilder(batch.CodecNone)
	b.Append(1, []byte("k"), []byte("v"), nil)
	b.Append(1, nil, []byte("v"), nil)
	noKey, _ := b.Build()
	c, _ := e.Partition("c", 0)
	if _, err := c.Append(noKey); !errors.Is(err, ErrNoKey) || c.log.HighWatermark() != 0 {
		t.Fatalf("compacted topic: %v (high watermark %d), want ErrNoKey", err, c.log.HighWatermark())
	}
	d, _ := e.Partition("d", 0)
	if _, err := d.Append(noKey); err != nil {
		t.Fatalf("delete topic: %v", err)
	}
	b.Reset(batch.CodecNone)
	b.Append(1, []byte("k"), nil, nil) // a tombstone has a key
	tomb, _ := b.Build()
	if _, err := c.Append(tomb); err != nil {
		t.Fatalf("tombstone: %v", err)
	}
}
