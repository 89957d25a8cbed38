package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
)

// firstBatch reads the batch at offset.
func firstBatch(t *testing.T, p *Partition, offset int64) batch.Batch {
	t.Helper()
	c, err := p.Read(offset, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	n, err := batch.Size(c.Data)
	if err != nil {
		t.Fatal(err)
	}
	v, err := batch.Validate(append([]byte(nil), c.Data[:n]...), 0)
	if err != nil {
		t.Fatalf("stored batch: %v", err)
	}
	return v
}

// TestLogAppendTime: on a LogAppendTime topic the stored batch carries the
// append time as its max timestamp with the attribute set and a valid CRC,
// records and producer fields as sent; a deduplicated retry answers the
// original's append time; a producer's own LogAppendTime batch is refused.
func TestLogAppendTime(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(5_000_000)
	e := openEngine(t, t.TempDir(), Options{Now: func() time.Time { return now }})
	defer e.Close()
	if err := e.CreateTopic("lat", 1, map[string]string{"message.timestamp.type": "LogAppendTime"}); err != nil {
		t.Fatal(err)
	}
	if err := e.CreateTopic("ct", 1); err != nil {
		t.Fatal(err)
	}
	p, _ := e.Partition("lat", 0)
	sent := idem(t, 7, 0, 0, 3, 1234)
	res, err := p.Append(sent)
	if err != nil {
		t.Fatal(err)
	}
	if res.LogAppendTime != now.UnixMilli() {
		t.Fatalf("append time %d, want %d", res.LogAppendTime, now.UnixMilli())
	}
	v := firstBatch(t, p, res.BaseOffset)
	if !v.LogAppendTime() || v.MaxTimestamp() != now.UnixMilli() || v.BaseTimestamp() != 1234 ||
		v.ProducerID() != 7 || v.BaseSequence() != 0 || v.RecordsCount() != 3 {
		t.Fatalf("stored: lat %v max %d base %d pid %d seq %d n %d", v.LogAppendTime(), v.MaxTimestamp(),
			v.BaseTimestamp(), v.ProducerID(), v.BaseSequence(), v.RecordsCount())
	}
	if !batch.Batch(sent).LogAppendTime() && batch.Batch(sent).MaxTimestamp() != 1234 {
		t.Fatal("the caller's bytes were modified")
	}
	now = now.Add(time.Minute)
	dup, err := p.Append(sent)
	if err != nil || !dup.Duplicate || dup.BaseOffset != res.BaseOffset || dup.LogAppendTime != res.LogAppendTime {
		t.Fatalf("retry: %+v, %v; want the original's offsets and append time %d", dup, err, res.LogAppendTime)
	}
	claimed := idem(t, 8, 0, 0, 1, 1234)
	batch.Batch(claimed).SetLogAppendTime(99)
	if _, err := p.Append(claimed); !errors.Is(err, ErrInvalidTimestamp) {
		t.Fatalf("a producer's LogAppendTime batch: %v, want ErrInvalidTimestamp", err)
	}
	if hw := p.log.HighWatermark(); hw != 3 {
		t.Fatalf("high watermark %d after a refusal, want 3", hw)
	}
	// On a CreateTime topic the producer's timestamps stay, and the answer
	// has no append time.
	c, _ := e.Partition("ct", 0)
	if res, err := c.Append(idem(t, 9, 0, 0, 1, 1234)); err != nil || res.LogAppendTime != -1 {
		t.Fatalf("CreateTime topic: %+v, %v", res, err)
	} else if v := firstBatch(t, c, res.BaseOffset); v.LogAppendTime() || v.MaxTimestamp() != 1234 {
		t.Fatalf("CreateTime topic stored lat %v max %d", v.LogAppendTime(), v.MaxTimestamp())
	}
}

// TestTimestampBounds: message.timestamp.before.max.ms and after.max.ms
// refuse a batch with a record outside [now-before, now+after], bounds
// included, whatever its other records; -1 passes; the deprecated
// difference.max.ms stands in for a side left unset.
func TestTimestampBounds(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(10_000_000)
	e := openEngine(t, t.TempDir(), Options{Now: func() time.Time { return now }})
	defer e.Close()
	if err := e.CreateTopic("b", 1, map[string]string{
		"message.timestamp.before.max.ms": "1000", "message.timestamp.after.max.ms": "500"}); err != nil {
		t.Fatal(err)
	}
	if err := e.CreateTopic("d", 1, map[string]string{"message.timestamp.difference.max.ms": "100"}); err != nil {
		t.Fatal(err)
	}
	ms := now.UnixMilli()
	build := func(ts ...int64) []byte {
		bld := batch.NewBuilder(batch.CodecNone)
		for _, x := range ts {
			bld.Append(x, nil, []byte("v"), nil)
		}
		b, err := bld.Build()
		if err != nil {
			t.Fatal(err)
		}
		return append([]byte(nil), b...)
	}
	cases := []struct {
		topic string
		ts    []int64
		ok    bool
	}{
		{"b", []int64{ms - 1000, ms, ms + 500}, true},
		{"b", []int64{ms, ms - 1001}, false},
		{"b", []int64{ms + 501}, false},
		{"d", []int64{ms - 100, ms + 100}, true},
		{"d", []int64{ms - 101}, false},
		{"d", []int64{ms + 101}, false},
	}
	for _, c := range cases {
		p, _ := e.Partition(c.topic, 0)
		before := p.log.HighWatermark()
		_, err := p.Append(build(c.ts...))
		if c.ok && err != nil {
			t.Errorf("%s %v: %v", c.topic, c.ts, err)
		}
		if !c.ok && (!errors.Is(err, ErrInvalidTimestamp) || p.log.HighWatermark() != before) {
			t.Errorf("%s %v: %v (high watermark %d -> %d), want ErrInvalidTimestamp and nothing written",
				c.topic, c.ts, err, before, p.log.HighWatermark())
		}
	}
	// A record without a timestamp passes every bound.
	bld := batch.NewBuilder(batch.CodecNone)
	bld.Append(-1, nil, []byte("v"), nil)
	b, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	p, _ := e.Partition("b", 0)
	if _, err := p.Append(b); err != nil {
		t.Fatalf("timestamp -1: %v", err)
	}
}

// TestLogAppendTimeAllocs: stamping the append time copies the batch into
// a pooled buffer; an append to a LogAppendTime topic allocates nothing.
// Skipped under the race detector, whose sync.Pool drops entries at random.
func TestLogAppendTimeAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops entries at random under the race detector")
	}
	e := openEngine(t, t.TempDir(), Options{})
	defer e.Close()
	if err := e.CreateTopic("lat", 1, map[string]string{"message.timestamp.type": "LogAppendTime"}); err != nil {
		t.Fatal(err)
	}
	p, _ := e.Partition("lat", 0)
	const n = 300
	bs := make([][]byte, n)
	for i := range n {
		bs[i] = idem(t, 7, 0, int32(i*10), 10, 1)
	}
	i := 0
	for ; i < 50; i++ {
		if _, err := p.Append(bs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if a := testing.AllocsPerRun(200, func() {
		if _, err := p.Append(bs[i]); err != nil {
			t.Fatal(err)
		}
		i++
	}); a != 0 {
		t.Fatalf("Append to a LogAppendTime topic: %v allocs per batch, want 0", a)
	}
}
