package testutil

import (
	"testing"

	"github.com/idemlog/idemlog/batch"
)

// BatchSpec describes a record batch for a test. The zero spec is a
// plain client batch (no producer id, uncompressed) of no records; set
// Values, Timestamps or Records for the records.
type BatchSpec struct {
	Codec batch.Codec
	// Producer sets the producer fields PID, Epoch and Seq (the base
	// sequence): an idempotent batch, transactional with Transactional.
	// Without it the batch has no producer id (-1) and no sequence; the
	// Transactional flag is set all the same (a batch a client must not
	// send, for tests of its refusal).
	Producer      bool
	PID           int64
	Epoch         int16
	Seq           int32
	Transactional bool
	// BaseOffset is written into the built batch (a client sends 0; a
	// test that lays out a segment sets the offsets a log would).
	BaseOffset int64

	// The records: one for each entry of Values, else of Timestamps,
	// else Records of them.
	Records int
	// Values[i] is record i's value; without Values, Value(i) when set,
	// else the single byte i.
	Values [][]byte
	Value  func(i int) []byte
	// Keys[i] is record i's key (nil for a null key, as beyond Keys).
	Keys [][]byte
	// Timestamps[i] is record i's timestamp; without them record i has
	// Timestamp + i*TimestampStep.
	Timestamps    []int64
	Timestamp     int64
	TimestampStep int64
}

// Batch builds the batch s describes and returns a copy the caller owns;
// a spec the builder refuses fails the test.
func Batch(t testing.TB, s BatchSpec) []byte {
	t.Helper()
	out, err := BuildBatch(s)
	if err != nil {
		t.Fatalf("cannot build batch %+v: %v", s, err)
	}
	return out
}

// BuildBatch is Batch for code without a testing.TB (a crash test's child
// that reports errors on its pipe, a benchmark's setup).
func BuildBatch(s BatchSpec) ([]byte, error) {
	b := batch.NewBuilder(s.Codec)
	if s.Producer {
		b.SetProducer(s.PID, s.Epoch, s.Seq)
	}
	b.SetTransactional(s.Transactional)
	n := s.Records
	switch {
	case s.Values != nil:
		n = len(s.Values)
	case s.Timestamps != nil:
		n = len(s.Timestamps)
	}
	for i := range n {
		ts := s.Timestamp + int64(i)*s.TimestampStep
		if s.Timestamps != nil {
			ts = s.Timestamps[i]
		}
		var key []byte
		if i < len(s.Keys) {
			key = s.Keys[i]
		}
		var value []byte
		switch {
		case s.Values != nil:
			value = s.Values[i]
		case s.Value != nil:
			value = s.Value(i)
		default:
			value = []byte{byte(i)}
		}
		b.Append(ts, key, value, nil)
	}
	built, err := b.Build()
	if err != nil {
		return nil, err
	}
	out := batch.Batch(append([]byte(nil), built...))
	if s.BaseOffset != 0 {
		out.SetBaseOffset(s.BaseOffset)
	}
	return out, nil
}

// Strings returns vals as byte slices, for BatchSpec.Values.
func Strings(vals ...string) [][]byte {
	out := make([][]byte, len(vals))
	for i, v := range vals {
		out[i] = []byte(v)
	}
	return out
}
