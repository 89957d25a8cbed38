package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/partition"
)

func TestConsumerSeek(t *testing.T) {
	t.Parallel()
	e := openEngine(t, t.TempDir(), Options{})
	if err := e.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	p, _ := e.Partition("t", 0)
	if _, err := p.Append(idem(t, 9, 0, 0, 4, time.Now().UnixMilli())); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Append(idem(t, 9, 0, 4, 4, time.Now().UnixMilli())); err != nil {
		t.Fatal(err)
	}
	// The group's committed offset says 7; Seek overrides it, also to an
	// offset inside a batch, whose earlier records are not delivered.
	if err := e.Frontend().CommitOffsets("g", map[TopicPartition]OffsetAndMetadata{{Topic: "t", Partition: 0}: {Offset: 7}}); err != nil {
		t.Fatal(err)
	}
	c := e.NewConsumer("g", ReadCommitted)
	if err := c.Assign(p); err != nil {
		t.Fatal(err)
	}
	c.Seek(p, 2)
	var got []int64
	if _, err := c.Poll(p, 1<<20, func(r *batch.Record) error { got = append(got, r.Offset); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 6 || got[0] != 2 || got[5] != 7 || c.Position(p) != 8 {
		t.Fatalf("after Seek(2): offsets %v, position %d; want 2..7 and 8", got, c.Position(p))
	}
	// Seek back, as after a rolled-back transaction: the records come again.
	c.Seek(p, 5)
	got = got[:0]
	if _, err := c.Poll(p, 1<<20, func(r *batch.Record) error { got = append(got, r.Offset); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0] != 5 {
		t.Fatalf("after Seek(5): offsets %v, want 5..7", got)
	}
	// Past the high watermark: the Poll fails, Seek itself does not.
	c.Seek(p, 9)
	if _, err := c.Poll(p, 1<<20, func(*batch.Record) error { return nil }); !errors.Is(err, partition.ErrOffsetOutOfRange) {
		t.Fatalf("poll past the high watermark: %v", err)
	}
	// Seek also assigns a partition the consumer had not assigned.
	c2 := e.NewConsumer("", ReadCommitted)
	c2.Seek(p, 6)
	n, err := c2.Poll(p, 1<<20, func(*batch.Record) error { return nil })
	if err != nil || n != 2 {
		t.Fatalf("poll of an unassigned partition after Seek: %d records, %v", n, err)
	}
}
