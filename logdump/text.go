package logdump

import (
	"strconv"
	"unicode/utf8"

	"github.com/idemlog/idemlog/batch"
)

// writeText prints a batch in DumpLogSegments' layout, so that output can
// be compared with Kafka's side by side: a batch line, then one "| " line
// per record. Problems go on their own "error:" lines after the batch line.
//
// Two fields Kafka's tool does not print end the batch line when they
// apply, for compacted logs: "gapBefore: N", the offsets skipped before
// the batch (negative: it overlaps the one before), and "emptied: true",
// a batch without records that compaction kept for its offsets and
// producer state.
func (d *dumper) writeText(b batch.Batch, pos int64, crcValid bool, gap int64, problems []error, it batch.Records) {
	tsType := "CreateTime"
	if b.LogAppendTime() {
		tsType = "LogAppendTime"
	}
	l := d.line[:0]
	l = appendField(l, "baseOffset: ", b.BaseOffset())
	l = appendField(l, " lastOffset: ", b.LastOffset())
	l = appendField(l, " count: ", int64(b.RecordsCount()))
	l = appendField(l, " baseSequence: ", int64(b.BaseSequence()))
	l = appendField(l, " lastSequence: ", int64(b.LastSequence()))
	l = appendField(l, " producerId: ", b.ProducerID())
	l = appendField(l, " producerEpoch: ", int64(b.ProducerEpoch()))
	l = appendField(l, " partitionLeaderEpoch: ", int64(b.PartitionLeaderEpoch()))
	l = strconv.AppendBool(append(l, " isTransactional: "...), b.IsTransactional())
	l = strconv.AppendBool(append(l, " isControl: "...), b.IsControl())
	if b.HasDeleteHorizon() {
		l = appendField(l, " deleteHorizonMs: ", b.BaseTimestamp())
	}
	l = appendField(l, " position: ", pos)
	l = appendField(append(append(l, ' '), tsType...), ": ", b.MaxTimestamp())
	l = appendField(l, " size: ", int64(len(b)))
	l = appendField(l, " magic: ", int64(b.Magic()))
	l = append(append(l, " compresscodec: "...), b.Codec().String()...)
	l = strconv.AppendUint(append(l, " crc: "...), uint64(b.CRC()), 10)
	l = strconv.AppendBool(append(l, " isvalid: "...), crcValid)
	if gap != 0 {
		l = appendField(l, " gapBefore: ", gap)
	}
	if b.RecordsCount() == 0 {
		l = append(l, " emptied: true"...)
	}
	l = append(l, '\n')
	for _, p := range problems {
		if p != nil {
			l = append(append(append(l, "error: "...), p.Error()...), '\n')
		}
	}
	d.write(l)

	var ctrl string
	if b.IsControl() {
		if c, err := b.Control(); err == nil {
			if c.Type == batch.ControlCommit || c.Type == batch.ControlAbort {
				ctrl = " endTxnMarker: " + c.Type.String() + " coordinatorEpoch: " + strconv.Itoa(int(c.CoordinatorEpoch))
			} else {
				ctrl = " controlType: " + c.Type.String()
			}
		}
	}
	var r batch.Record
	var h batch.Header
	for it.Next(&r) {
		l = l[:0]
		l = appendField(l, "| offset: ", r.Offset)
		l = appendField(append(append(l, ' '), tsType...), ": ", r.Timestamp)
		l = appendField(l, " keySize: ", int64(bytesSize(r.Key)))
		l = appendField(l, " valueSize: ", int64(bytesSize(r.Value)))
		seq := batch.NoSequence
		if b.BaseSequence() >= 0 {
			seq = batch.LastSequence(b.BaseSequence(), r.OffsetDelta)
		}
		l = appendField(l, " sequence: ", int64(seq))
		l = append(l, " headerKeys: ["...)
		hi := r.Headers()
		for i := 0; hi.Next(&h); i++ {
			if i > 0 {
				l = append(l, ',')
			}
			l = appendText(l, h.Key)
		}
		l = append(l, ']')
		if ctrl != "" {
			l = append(l, ctrl...)
		} else {
			// Like Kafka, a null key or value is left out rather than
			// printed as a word that a real key could also be; keySize
			// and valueSize -1 say which.
			if r.Key != nil {
				l = appendText(append(l, " key: "...), r.Key)
			}
			if r.Value != nil {
				l = appendText(append(l, " payload: "...), r.Value)
			}
		}
		d.write(append(l, '\n'))
	}
	d.line = l
}

func appendField(l []byte, label string, v int64) []byte {
	return strconv.AppendInt(append(l, label...), v, 10)
}

// bytesSize is the size Kafka reports for a key or value: -1 when null.
func bytesSize(v []byte) int {
	if v == nil {
		return -1
	}
	return len(v)
}

// appendText appends v as is when it is non-empty printable UTF-8, and as a
// Go-quoted string otherwise, so that binary data cannot garble a terminal
// or split a line, and an empty value still shows up as "".
func appendText(l, v []byte) []byte {
	if printable(v) {
		return append(l, v...)
	}
	return strconv.AppendQuote(l, string(v))
}

// printable reports whether v can be printed unquoted. A leading quote is
// excluded so that a quoted rendering is never mistaken for a raw one.
func printable(v []byte) bool {
	if len(v) == 0 || v[0] == '"' {
		return false
	}
	for len(v) > 0 {
		r, n := utf8.DecodeRune(v)
		if r == utf8.RuneError && n <= 1 || !strconv.IsPrint(r) {
			return false
		}
		v = v[n:]
	}
	return true
}
