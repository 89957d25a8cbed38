package interop

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/idemlog/idemlog/batch"
)

type markerCase struct {
	name string
	m    batch.Marker
}

func markerCases() []markerCase {
	return []markerCase{
		{"commit", batch.Marker{Type: batch.ControlCommit, ProducerID: 4242, ProducerEpoch: 7, CoordinatorEpoch: 3, Timestamp: 1_700_000_000_123}},
		{"abort", batch.Marker{Type: batch.ControlAbort, ProducerID: 1, ProducerEpoch: 0, CoordinatorEpoch: 0, Timestamp: 0}},
		{"max-fields", batch.Marker{Type: batch.ControlCommit, ProducerID: math.MaxInt64, ProducerEpoch: math.MaxInt16, CoordinatorEpoch: math.MaxInt32, Timestamp: math.MaxInt64}},
		{"negative-coordinator-epoch", batch.Marker{Type: batch.ControlAbort, ProducerID: 9, ProducerEpoch: 2, CoordinatorEpoch: -1, Timestamp: 17}},
	}
}

// TestMarkerIdemlogToFranz: a marker from batch.AppendMarker must read, in
// franz-go's types, as a transactional control batch whose one record has a
// ControlRecordKey and an EndTxnMarker value, both version 0.
func TestMarkerIdemlogToFranz(t *testing.T) {
	for _, tc := range markerCases() {
		t.Run(tc.name, func(t *testing.T) {
			// A non-empty prefix checks that AppendMarker appends and
			// computes the CRC over its own batch only.
			prefix := []byte("previous batch bytes")
			out := batch.AppendMarker(bytes.Clone(prefix), tc.m)
			if !bytes.Equal(out[:len(prefix)], prefix) {
				t.Fatal("AppendMarker overwrote dst")
			}
			raw := out[len(prefix):]
			if len(raw) != 78 {
				t.Fatalf("marker is %d bytes, want 78", len(raw))
			}
			fb := franzDecode(t, raw)
			got := [...]int64{fb.FirstOffset, int64(fb.Length), int64(fb.PartitionLeaderEpoch), int64(fb.Attributes),
				int64(fb.LastOffsetDelta), fb.FirstTimestamp, fb.MaxTimestamp, fb.ProducerID, int64(fb.ProducerEpoch),
				int64(fb.FirstSequence), int64(fb.NumRecords)}
			want := [...]int64{0, 66, -1, 0x30, 0, tc.m.Timestamp, tc.m.Timestamp, tc.m.ProducerID,
				int64(tc.m.ProducerEpoch), -1, 1}
			names := [...]string{"firstOffset", "length", "leaderEpoch", "attributes", "lastOffsetDelta",
				"firstTimestamp", "maxTimestamp", "producerID", "producerEpoch", "firstSequence", "numRecords"}
			for i := range got {
				if got[i] != want[i] {
					t.Errorf("franz marker %s = %d, want %d", names[i], got[i], want[i])
				}
			}
			kr := fb.Records[0]
			if kr.TimestampDelta64 != 0 || kr.OffsetDelta != 0 || len(kr.Headers) != 0 || len(kr.Key) != 4 || len(kr.Value) != 6 {
				t.Fatalf("franz control record: tsDelta %d, offsetDelta %d, %d headers, key %x, value %x",
					kr.TimestampDelta64, kr.OffsetDelta, len(kr.Headers), kr.Key, kr.Value)
			}
			var key kmsg.ControlRecordKey
			if err := key.ReadFrom(kr.Key); err != nil {
				t.Fatalf("kmsg.ControlRecordKey: %v", err)
			}
			if key.Version != 0 || key.Type != kmsg.ControlRecordKeyType(tc.m.Type) {
				t.Fatalf("control key version %d type %v, want 0 %v", key.Version, key.Type, tc.m.Type)
			}
			var val kmsg.EndTxnMarker
			if err := val.ReadFrom(kr.Value); err != nil {
				t.Fatalf("kmsg.EndTxnMarker: %v", err)
			}
			if val.Version != 0 || val.CoordinatorEpoch != tc.m.CoordinatorEpoch {
				t.Fatalf("end txn marker version %d coordinator epoch %d, want 0 %d", val.Version, val.CoordinatorEpoch, tc.m.CoordinatorEpoch)
			}
			// With no codec and a fixed record shape, the franz-go
			// layout of the same marker must be the same bytes.
			if fz := franzControl(0, tc.m.ProducerID, tc.m.ProducerEpoch, kmsg.ControlRecordKeyType(tc.m.Type),
				tc.m.CoordinatorEpoch, tc.m.Timestamp, 0x30); !bytes.Equal(fz, raw) {
				t.Fatalf("franz-go marker differs from AppendMarker at byte %d", firstDiff(fz, raw))
			}
		})
	}
}

// TestMarkerFranzToIdemlog: a control batch laid out with kmsg's types must
// pass Validate (a log may hold it), be refused as a client append, and
// decode with Batch.Control.
func TestMarkerFranzToIdemlog(t *testing.T) {
	for _, tc := range markerCases() {
		t.Run(tc.name, func(t *testing.T) {
			const base = 1234
			raw := franzControl(base, tc.m.ProducerID, tc.m.ProducerEpoch, kmsg.ControlRecordKeyType(tc.m.Type),
				tc.m.CoordinatorEpoch, tc.m.Timestamp, 0x30)
			b, err := batch.Validate(raw, 0)
			if err != nil {
				t.Fatalf("Validate of franz-go marker: %v", err)
			}
			if !b.IsControl() || !b.IsTransactional() || b.Codec() != batch.CodecNone ||
				b.BaseOffset() != base || b.LastOffset() != base || b.ProducerID() != tc.m.ProducerID ||
				b.ProducerEpoch() != tc.m.ProducerEpoch || b.BaseSequence() != batch.NoSequence ||
				b.BaseTimestamp() != tc.m.Timestamp || b.MaxTimestamp() != tc.m.Timestamp {
				t.Fatalf("idemlog header of franz-go marker: control %v txn %v codec %v base %d last %d pid %d epoch %d seq %d ts %d/%d",
					b.IsControl(), b.IsTransactional(), b.Codec(), b.BaseOffset(), b.LastOffset(), b.ProducerID(),
					b.ProducerEpoch(), b.BaseSequence(), b.BaseTimestamp(), b.MaxTimestamp())
			}
			c, err := b.Control()
			if err != nil {
				t.Fatalf("Control of franz-go marker: %v", err)
			}
			if want := (batch.Control{Type: tc.m.Type, Version: 0, CoordinatorEpoch: tc.m.CoordinatorEpoch}); c != want {
				t.Fatalf("Control = %+v, want %+v", c, want)
			}
			if _, err := batch.ValidateProduce(raw, 0); err == nil {
				t.Fatal("ValidateProduce accepted a control batch with a non-zero base offset")
			}
			raw0 := bytes.Clone(raw)
			batch.Batch(raw0).SetBaseOffset(0)
			if _, err := batch.ValidateProduce(raw0, 0); !errors.Is(err, batch.ErrClientControl) {
				t.Fatalf("ValidateProduce of a control batch: %v, want ErrClientControl", err)
			}
		})
	}
}

// TestControlShapesFromFranz covers control records beyond COMMIT/ABORT as
// franz-go would lay them out: KRaft types carry no EndTxnMarker value, and
// a COMMIT without the transactional bit is not a marker a log may hold.
func TestControlShapesFromFranz(t *testing.T) {
	t.Run("kraft-type", func(t *testing.T) {
		key := kmsg.ControlRecordKey{Version: 0, Type: 2}
		leader := kmsg.LeaderChangeMessage{Version: 0, LeaderID: 3}
		kr := kmsg.Record{Key: key.AppendTo(nil), Value: leader.AppendTo(nil)}
		kr.Length = int32(len(kr.AppendTo(nil)) - 1)
		raw := franzSeal(kmsg.RecordBatch{PartitionLeaderEpoch: -1, Attributes: 0x20, ProducerID: -1,
			ProducerEpoch: -1, FirstSequence: -1, NumRecords: 1, Records: kr.AppendTo(nil)})
		b, err := batch.Validate(raw, 0)
		if err != nil {
			t.Fatalf("Validate of a KRaft control batch: %v", err)
		}
		c, err := b.Control()
		if err != nil || c.Type != 2 || c.Version != 0 {
			t.Fatalf("Control = %+v, %v; want type 2 version 0", c, err)
		}
	})
	t.Run("higher-key-version", func(t *testing.T) {
		raw := franzControl(0, 5, 1, 1, 8, 100, 0x30)
		// Bump the key version in place (record bytes 5-6 hold it) and
		// re-seal, as a future broker could write it.
		raw[batch.HeaderSize+6] = 1
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(raw); err != nil {
			t.Fatal(err)
		}
		raw = franzSeal(rb)
		c, err := batch.Batch(raw).Control()
		if err != nil || c.Type != batch.ControlCommit || c.CoordinatorEpoch != 8 || c.Version != 1 {
			t.Fatalf("Control = %+v, %v; want COMMIT version 1 coordinator epoch 8", c, err)
		}
	})
	t.Run("commit-not-transactional", func(t *testing.T) {
		raw := franzControl(0, 5, 1, 1, 8, 100, 0x20)
		if _, err := batch.Validate(raw, 0); !errors.Is(err, batch.ErrControl) {
			t.Fatalf("Validate of a non-transactional COMMIT: %v, want ErrControl", err)
		}
	})
}
