package kafka

import (
	"bytes"
	"testing"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/engine"
)

// ListOffsets by timestamp must answer an offset at or above the log start
// (Kafka: searchForTimestamp(target, position, startingOffset = log start)
// takes the first record with timestamp >= target AND offset >= log start).
// A multi-record batch straddling the log start whose first record
// qualifies makes offsetForTime answer that record, below the log start.
func TestReviewEListOffsetsByTimeBelowLogStart(t *testing.T) {
	e, err := engine.Open(t.TempDir(), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	p, _ := e.Partition("t", 0)
	b := batch.NewBuilder(batch.CodecNone)
	for _, ts := range []int64{100, 10, 10, 100, 10} {
		b.Append(ts, nil, []byte("v"), nil)
	}
	raw, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Append(bytes.Clone(raw)); err != nil {
		t.Fatal(err)
	}
	if err := p.Log().DeleteRecordsBefore(2); err != nil {
		t.Fatal(err)
	}
	off, ts, err := offsetForTime(p, 50, false)
	if err != nil {
		t.Fatal(err)
	}
	if off != 3 || ts != 100 {
		t.Fatalf("offsetForTime(50) with log start 2 = offset %d ts %d; want offset 3 ts 100", off, ts)
	}
}
