package testutil

import (
	"bytes"
	"testing"

	"github.com/idemlog/idemlog/batch"
)

// Every field of a spec lands in the batch, which validates as a client
// batch (or, with a base offset, as a stored one).
func TestBatchFollowsSpec(t *testing.T) {
	s := BatchSpec{
		Codec: batch.CodecZstd, Producer: true, PID: 7, Epoch: 2, Seq: 40, Transactional: true,
		Values: Strings("a", "bb", "ccc"), Keys: [][]byte{[]byte("k0")},
		Timestamp: 1000, TimestampStep: 5, BaseOffset: 30,
	}
	b, err := batch.Validate(Batch(t, s), 0)
	if err != nil {
		t.Fatal(err)
	}
	if b.Codec() != s.Codec || b.ProducerID() != 7 || b.ProducerEpoch() != 2 || b.BaseSequence() != 40 || !b.IsTransactional() {
		t.Fatalf("header: codec %v pid %d epoch %d seq %d txn %v", b.Codec(), b.ProducerID(), b.ProducerEpoch(), b.BaseSequence(), b.IsTransactional())
	}
	if b.BaseOffset() != 30 || b.MaxTimestamp() != 1010 || b.RecordsCount() != 3 {
		t.Fatalf("base offset %d, max timestamp %d, %d records", b.BaseOffset(), b.MaxTimestamp(), b.RecordsCount())
	}
	var d batch.Decoder
	it, err := d.Records(b)
	if err != nil {
		t.Fatal(err)
	}
	var r batch.Record
	for i := 0; it.Next(&r); i++ {
		var key []byte
		if i == 0 {
			key = []byte("k0")
		}
		if r.Timestamp != 1000+5*int64(i) || !bytes.Equal(r.Value, s.Values[i]) || !bytes.Equal(r.Key, key) || (i > 0) != (r.Key == nil) {
			t.Fatalf("record %d: ts %d key %q value %q", i, r.Timestamp, r.Key, r.Value)
		}
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}

	plain, err := batch.ValidateProduce(Batch(t, BatchSpec{Timestamps: []int64{3, 1}}), 0)
	if err != nil {
		t.Fatal(err)
	}
	if plain.HasProducerID() || plain.BaseSequence() != batch.NoSequence || plain.RecordsCount() != 2 || plain.MaxTimestamp() != 3 {
		t.Fatalf("plain batch: pid %d seq %d, %d records, max timestamp %d", plain.ProducerID(), plain.BaseSequence(), plain.RecordsCount(), plain.MaxTimestamp())
	}
}
