package fuzz

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/idemlog/idemlog/batch"
)

// Flag bits of FuzzControl beyond the attribute bits 0-6 it copies.
const ctlSpareDelta = 0x80 // lastOffsetDelta one past count, as after compaction

// markerRecord is §1.4's record for a marker: length 16, attributes,
// timestamp and offset deltas 0, a 4-byte key, a 6-byte value, no headers.
func markerRecord(version, typ int16, valueVersion int16, coordinatorEpoch int32) []byte {
	r := []byte{0x20, 0, 0, 0, 0x08}
	r = binary.BigEndian.AppendUint16(r, uint16(version))
	r = binary.BigEndian.AppendUint16(r, uint16(typ))
	r = append(r, 0x0c)
	r = binary.BigEndian.AppendUint16(r, uint16(valueVersion))
	r = binary.BigEndian.AppendUint32(r, uint32(coordinatorEpoch))
	return append(r, 0)
}

// FuzzControl puts arbitrary record bytes in a control batch with a correct
// CRC and compares Control and Validate with the reference reading of §1.4.
func FuzzControl(f *testing.F) {
	f.Add(markerRecord(0, 1, 0, 5), int32(1), byte(0x10))
	f.Add(markerRecord(0, 0, 0, -1), int32(1), byte(0))
	f.Add(markerRecord(-1, 1, 0, 5), int32(1), byte(0x10))
	f.Add(markerRecord(0, 1, 0, 5)[:12], int32(1), byte(0x10))
	f.Add([]byte{}, int32(0), byte(0x10|ctlSpareDelta))

	f.Fuzz(func(t *testing.T, section []byte, count int32, flags byte) {
		if len(section) > maxInput {
			return
		}
		delta := max(count-1, 0)
		if flags&ctlSpareDelta != 0 {
			delta = max(count, 0)
		}
		raw := seal(hdr{
			attrs:           0x20 | uint16(flags&0x5f),
			lastOffsetDelta: delta,
			baseTs:          1, maxTs: 2,
			producerID: 7, producerEpoch: 1, baseSequence: -1,
			count: count,
		}, section)
		b, err := batch.Parse(raw)
		if err != nil {
			t.Fatalf("Parse of a sealed batch: %v", err)
		}

		c, err := b.Control()
		want, ok := refParseControl(section)
		switch {
		case !ok:
			wantErr(t, "Control", err, batch.ErrControl)
		case err != nil:
			t.Fatalf("Control: %v, reference reads %+v", err, want)
		case int16(c.Type) != want.typ || c.Version != want.version || c.CoordinatorEpoch != want.coordinatorEpoch:
			t.Fatalf("Control = %+v, reference %+v", c, want)
		}

		v, err := batch.Validate(raw, 0)
		if want := refValidate(raw, 0); want != nil {
			wantErr(t, "Validate", err, want)
		} else if err != nil {
			t.Fatalf("Validate: %v, reference accepts", err)
		}
		_, perr := batch.ValidateProduce(raw, 0)
		if want := refValidateProduce(raw, 0); want != nil {
			wantErr(t, "ValidateProduce", perr, want)
		} else {
			t.Fatalf("reference accepts a control batch from a client (%v)", perr)
		}
		if err == nil {
			checkValid(t, v, 0)
			d := batch.Decoder{Limit: limit}
			checkRecords(t, &d, v)
		}
	})
}

// FuzzMarker checks that AppendMarker writes §1.4's marker for any field
// values, after any prefix, and that the batch package reads it back.
func FuzzMarker(f *testing.F) {
	f.Add(int16(1), int64(42), int16(3), int32(7), int64(1700000000000), []byte{})
	f.Add(int16(0), int64(-1), int16(-1), int32(-1), int64(-1), []byte("prefix"))
	f.Add(int16(5), int64(0), int16(0), int32(0), int64(0), []byte{})

	f.Fuzz(func(t *testing.T, typ int16, pid int64, epoch int16, coordinatorEpoch int32, ts int64, prefix []byte) {
		if len(prefix) > maxInput {
			return
		}
		m := batch.Marker{
			Type: batch.ControlType(typ), ProducerID: pid, ProducerEpoch: epoch,
			CoordinatorEpoch: coordinatorEpoch, Timestamp: ts,
		}
		out := batch.AppendMarker(bytes.Clone(prefix), m)
		if !bytes.Equal(out[:len(prefix)], prefix) {
			t.Fatal("AppendMarker changed the bytes before it")
		}
		raw := out[len(prefix):]
		if len(raw) != 78 {
			t.Fatalf("marker of %d bytes, want 78", len(raw))
		}
		want := seal(hdr{
			leaderEpoch: -1, attrs: 0x30, baseTs: ts, maxTs: ts,
			producerID: pid, producerEpoch: epoch, baseSequence: -1, count: 1,
		}, markerRecord(0, typ, 0, coordinatorEpoch))
		if !bytes.Equal(raw, want) {
			t.Fatalf("AppendMarker(%+v) =\n%x, want\n%x", m, raw, want)
		}
		v, err := batch.Validate(raw, 0)
		if err != nil {
			t.Fatalf("Validate(marker): %v", err)
		}
		c, err := v.Control()
		if err != nil {
			t.Fatalf("Control(marker): %v", err)
		}
		wantEpoch := int32(0)
		if typ == 0 || typ == 1 {
			wantEpoch = coordinatorEpoch
		}
		if c.Type != m.Type || c.Version != 0 || c.CoordinatorEpoch != wantEpoch {
			t.Fatalf("Control = %+v, marker %+v", c, m)
		}
		_, err = batch.ValidateProduce(raw, 0)
		wantErr(t, "ValidateProduce(marker)", err, batch.ErrClientControl)
	})
}
