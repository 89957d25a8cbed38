package logdump

import "github.com/idemlog/idemlog/batch"

// jsonBatch is one line of JSON output. Field order is the output's field
// order and is part of the format.
type jsonBatch struct {
	BaseOffset      int64  `json:"baseOffset"`
	LastOffset      int64  `json:"lastOffset"`
	ProducerID      int64  `json:"producerId"`
	ProducerEpoch   int16  `json:"producerEpoch"`
	BaseSequence    int32  `json:"baseSequence"`
	IsTransactional bool   `json:"isTransactional"`
	IsControl       bool   `json:"isControl"`
	Compression     string `json:"compression"`
	CRCValid        bool   `json:"crcValid"`
	// DeleteHorizonMs is the delete horizon compaction stamped on the
	// batch (attribute bit 6, KIP-534), -1 without one.
	DeleteHorizonMs int64 `json:"deleteHorizonMs"`
	// GapBefore is the offsets skipped before the batch (compaction
	// leaves gaps; negative: an overlap with the batch before).
	GapBefore int64 `json:"gapBefore"`
	// Emptied: the batch has no records, a header compaction kept for
	// its offsets and producer state.
	Emptied bool         `json:"emptied"`
	Records []jsonRecord `json:"records"`
}

// jsonRecord relies on encoding/json writing a nil []byte as null and a
// non-nil empty one as "", which is exactly how batch.Record tells a null
// key or value from an empty one.
type jsonRecord struct {
	Offset    int64        `json:"offset"`
	Timestamp int64        `json:"timestamp"`
	Key       []byte       `json:"key"`
	Value     []byte       `json:"value"`
	Headers   []jsonHeader `json:"headers"`
}

// jsonHeader's key is a string because header keys are UTF-8 names on the
// wire; encoding/json replaces invalid UTF-8 with U+FFFD.
type jsonHeader struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
}

// noHeaders and noRecords are non-nil so that they encode as [] rather
// than null.
var (
	noHeaders = []jsonHeader{}
	noRecords = []jsonRecord{}
)

// writeJSON encodes b as one line. Keys and values alias the batch or the
// Decoder's buffer, which is fine: they are encoded before the next batch
// is read.
func (d *dumper) writeJSON(b batch.Batch, crcValid bool, gap int64, it batch.Records) {
	recs, hdrs := d.recs[:0], d.hdrs[:0]
	var r batch.Record
	var h batch.Header
	for it.Next(&r) {
		jr := jsonRecord{Offset: r.Offset, Timestamp: r.Timestamp, Key: r.Key, Value: r.Value, Headers: noHeaders}
		if r.HeaderCount > 0 {
			start := len(hdrs)
			hi := r.Headers()
			for hi.Next(&h) {
				hdrs = append(hdrs, jsonHeader{Key: string(h.Key), Value: h.Value})
			}
			// Later appends may move hdrs; this record keeps the array
			// its headers were written to, which nothing writes again
			// until the next batch.
			jr.Headers = hdrs[start:len(hdrs):len(hdrs)]
		}
		recs = append(recs, jr)
	}
	d.recs, d.hdrs = recs, hdrs
	if len(recs) == 0 {
		recs = noRecords
	}
	d.jb = jsonBatch{
		BaseOffset:      b.BaseOffset(),
		LastOffset:      b.LastOffset(),
		ProducerID:      b.ProducerID(),
		ProducerEpoch:   b.ProducerEpoch(),
		BaseSequence:    b.BaseSequence(),
		IsTransactional: b.IsTransactional(),
		IsControl:       b.IsControl(),
		Compression:     b.Codec().String(),
		CRCValid:        crcValid,
		DeleteHorizonMs: -1,
		GapBefore:       gap,
		Emptied:         b.RecordsCount() == 0,
		Records:         recs,
	}
	if b.HasDeleteHorizon() {
		d.jb.DeleteHorizonMs = b.BaseTimestamp()
	}
	if d.writeErr == nil {
		if err := d.enc.Encode(&d.jb); err != nil {
			d.writeErr = err
		}
	}
}
