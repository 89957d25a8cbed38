package engine

import (
	"fmt"
	"sync"

	"github.com/idemlog/idemlog/batch"
)

// Broker-side compression (a topic's compression.type, Kafka's
// LogValidator): "producer" keeps each batch as its producer compressed it;
// a codec, or "uncompressed", makes the engine store every batch in that
// codec. A batch already in the topic's codec is stored as it came, with no
// re-encoding (the codec's level is not compared, as in Kafka). Any other
// batch is rebuilt: one new batch in the topic's codec, at the topic's
// level for it, with the same producer id, epoch, base sequence and
// transactional flag, and every record's key, value, headers and timestamp;
// offsets are assigned at the append as for any batch. A rebuilt batch
// larger than max.message.bytes is refused (MESSAGE_TOO_LARGE).

// recompressors are the Builders that rebuild batches in a topic's codec;
// their buffers and compressors are kept for the next.
var recompressors = sync.Pool{New: func() any { return batch.NewBuilder(batch.CodecNone) }}

// needsRecompression reports whether v must be rebuilt for s's codec.
func (s *topicSettings) needsRecompression(v batch.Batch) bool {
	return s.recompress && v.Codec() != s.codec
}

// recompress rebuilds v in s's codec with b (one of recompressors). The
// result lives in b's buffers: valid until b's next use.
func recompress(v batch.Batch, s *topicSettings, b *batch.Builder) (batch.Batch, error) {
	b.Reset(s.codec)
	b.SetLevel(s.levels[s.codec])
	b.SetProducer(v.ProducerID(), v.ProducerEpoch(), v.BaseSequence())
	b.SetTransactional(v.IsTransactional())
	d := recordCheckers.Get().(*batch.Decoder)
	defer recordCheckers.Put(d)
	recs, err := d.Records(v)
	if err != nil {
		return nil, fmt.Errorf("cannot recompress: %w", err)
	}
	var r batch.Record
	var headers []batch.Header
	for recs.Next(&r) {
		headers = headers[:0]
		it := r.Headers()
		var h batch.Header
		for it.Next(&h) {
			headers = append(headers, h)
		}
		b.Append(r.Timestamp, r.Key, r.Value, headers)
	}
	if err := recs.Err(); err != nil {
		return nil, fmt.Errorf("cannot recompress: %w", err)
	}
	out, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("cannot recompress: %w", err)
	}
	return out, nil
}

// checkKeys refuses v if one of its records has no key.
func checkKeys(v batch.Batch) error {
	d := recordCheckers.Get().(*batch.Decoder)
	defer recordCheckers.Put(d)
	recs, err := d.Records(v)
	if err != nil {
		return err
	}
	var r batch.Record
	for recs.Next(&r) {
		if r.Key == nil {
			return fmt.Errorf("record at offset delta %d: %w", r.OffsetDelta, ErrNoKey)
		}
	}
	return recs.Err()
}
