package engine

import (
	"fmt"
	"math"
	"sync"

	"github.com/idemlog/idemlog/batch"
)

// A topic's timestamp rules (Kafka's LogValidator, KIP-32, KIP-937):
//
//   - CreateTime (the default): a record's timestamp is the producer's. With
//     message.timestamp.before.max.ms or after.max.ms set, every record whose
//     timestamp is not -1 must lie within [now-before, now+after] (ms, the
//     engine's clock, bounds included), or the whole batch is refused with
//     INVALID_TIMESTAMP and nothing is written.
//   - LogAppendTime: the engine stamps the batch with the time of its
//     append. Only the header changes: the LogAppendTime attribute is set,
//     maxTimestamp becomes now and the CRC is resealed; records, their
//     timestamp deltas, the producer fields and the sequence stay as sent.
//     Readers take maxTimestamp as every record's timestamp. A producer
//     that sets the attribute itself is refused (INVALID_TIMESTAMP), as
//     Kafka refuses it; a retry that is deduplicated answers the original
//     append's time.

// timestampsBounded reports whether s checks CreateTime records' range.
func (s *topicSettings) timestampsBounded() bool {
	return !s.logAppendTime && (s.tsBefore != math.MaxInt64 || s.tsAfter != math.MaxInt64)
}

// checkTimestamps refuses v if one of its records' timestamps lies outside
// [now-before, now+after].
func checkTimestamps(v batch.Batch, s *topicSettings, now int64) error {
	// Both bounds are at least 0: a wrapped sum is past the end of the
	// range, which then bounds nothing on that side.
	lo, hi := now-s.tsBefore, now+s.tsAfter
	if lo > now {
		lo = math.MinInt64
	}
	if hi < now {
		hi = math.MaxInt64
	}
	d := recordCheckers.Get().(*batch.Decoder)
	defer recordCheckers.Put(d)
	recs, err := d.Records(v)
	if err != nil {
		return err
	}
	var r batch.Record
	for i := 0; recs.Next(&r); i++ {
		if ts := r.Timestamp; ts != -1 && (ts < lo || ts > hi) {
			return fmt.Errorf("cannot append: timestamp %d of the record at offset delta %d is out of range, it should be within [%d, %d]: %w",
				ts, r.OffsetDelta, lo, hi, ErrInvalidTimestamp)
		}
	}
	return recs.Err()
}

// appendTimeBufs hold the copies of batches stamped with their append time,
// so that a LogAppendTime topic's appends do not allocate.
var appendTimeBufs = sync.Pool{New: func() any { return new([]byte) }}

// stampAppendTime copies v into buf (one of appendTimeBufs) and stamps the
// copy with the append time now.
func stampAppendTime(v batch.Batch, now int64, buf *[]byte) batch.Batch {
	*buf = append((*buf)[:0], v...)
	stamped := batch.Batch(*buf)
	stamped.SetLogAppendTime(now)
	return stamped
}

// putAppendTimeBuf gives buf back to appendTimeBufs; an outsized batch's
// buffer is let go.
func putAppendTimeBuf(buf *[]byte) {
	if cap(*buf) <= 4<<20 {
		appendTimeBufs.Put(buf)
	}
}
