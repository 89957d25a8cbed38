package sink

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/partition"
)

func TestEngineSourceWaitsForRecords(t *testing.T) {
	t.Parallel()
	e := openTestEngine(t, 2)
	src, err := NewEngineSource(e, "t")
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range src.Partitions() {
		if err := src.Seek(tp, FromStart); err != nil {
			t.Fatal(err)
		}
	}
	var f Fetched
	done := make(chan error, 1)
	go func() { done <- src.Fetch(context.Background(), &f) }()
	select {
	case err := <-done:
		t.Fatalf("fetch of empty partitions returned %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	produce(t, e, 1, 3, 3)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("fetch did not wake for records appended to the second partition")
	}
	if len(f.Records) != 3 || f.Records[0].Partition != 1 || string(f.Records[2].Value) != "v2" {
		t.Fatalf("fetched %+v", f.Records)
	}
	if len(f.Next) != 1 || f.Next[0] != (Position{TopicPartition{"t", 1}, 3}) {
		t.Fatalf("positions %+v, want t-1 at 3", f.Next)
	}

	// Nothing left: a cancelled context ends the wait with its error.
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	if err := src.Fetch(ctx, &f); !errors.Is(err, context.Canceled) {
		t.Fatalf("fetch with a cancelled context: %v", err)
	}
}

func TestEngineSourceOutOfRange(t *testing.T) {
	t.Parallel()
	e := openTestEngine(t, 1)
	produce(t, e, 0, 10, 1)
	p, _ := e.Partition("t", 0)
	if _, err := p.DeleteRecordsBefore(5); err != nil {
		t.Fatal(err)
	}
	src, err := NewEngineSource(e, "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	tp := TopicPartition{"t", 0}
	// A stored position below the log start: records were deleted before
	// they were applied, and the fetch says so rather than skip them.
	src.Seek(tp, 3)
	var f Fetched
	if err := src.Fetch(context.Background(), &f); !errors.Is(err, partition.ErrOffsetOutOfRange) {
		t.Fatalf("fetch below the log start: %v", err)
	}
	// FromStart is the log start.
	src.Seek(tp, FromStart)
	if err := src.Fetch(context.Background(), &f); err != nil || f.Records[0].Offset != 5 {
		t.Fatalf("fetch from the start: %v, %+v", err, f.Records)
	}
	if err := src.Seek(TopicPartition{"t", 1}, 0); !errors.Is(err, engine.ErrUnknownTopicOrPartition) {
		t.Fatalf("seek of a partition the source does not read: %v", err)
	}
	if _, err := NewEngineSource(e, "nope"); !errors.Is(err, engine.ErrUnknownTopicOrPartition) {
		t.Fatalf("source over an unknown topic: %v", err)
	}
	if _, err := NewEngineSource(e, "t", 4); !errors.Is(err, engine.ErrUnknownTopicOrPartition) {
		t.Fatalf("source over an unknown partition: %v", err)
	}
}

func TestFetchedCopiesRecords(t *testing.T) {
	t.Parallel()
	e := openTestEngine(t, 1)
	p, _ := e.Partition("t", 0)
	pr, err := e.NewProducer()
	if err != nil {
		t.Fatal(err)
	}
	bld := batch.NewBuilder(batch.CodecNone)
	bld.Append(time.Now().UnixMilli(), []byte("k"), []byte("v"), []batch.Header{{Key: []byte("h1"), Value: []byte("x")}, {Key: []byte("h2")}})
	if _, err := pr.Send(p, bld); err != nil {
		t.Fatal(err)
	}
	src, _ := NewEngineSource(e, "t")
	src.Seek(TopicPartition{"t", 0}, FromStart)
	var f Fetched
	if err := src.Fetch(context.Background(), &f); err != nil {
		t.Fatal(err)
	}
	r := f.Records[0]
	if string(r.Key) != "k" || string(r.Value) != "v" || len(r.Headers) != 2 ||
		string(r.Headers[0].Key) != "h1" || string(r.Headers[0].Value) != "x" ||
		string(r.Headers[1].Key) != "h2" || r.Headers[1].Value != nil {
		t.Fatalf("record %+v", r)
	}

	// Add copies: the caller's buffers may change after it.
	var g Fetched
	key := []byte("abc")
	g.Add(&Record{Key: key, Headers: []Header{{Key: key}}})
	key[0] = 'X'
	if string(g.Records[0].Key) != "abc" || string(g.Records[0].Headers[0].Key) != "abc" {
		t.Fatalf("Add kept the caller's buffer: %+v", g.Records[0])
	}
}
