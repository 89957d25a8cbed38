package sink

import (
	"context"
	"fmt"
	"reflect"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/engine"
)

// DefaultMaxBytes is how many bytes of batches an EngineSource reads per
// Fetch unless told otherwise: one fetch is one store transaction, so this
// sets how many records share a commit.
const DefaultMaxBytes = 1 << 20

// EngineSource is a Source over partitions of an embedded engine, read
// through an engine.Consumer at engine.ReadCommitted. The consumer has no
// group: its positions come from the store, never from the engine's
// committed offsets.
type EngineSource struct {
	c     *engine.Consumer
	parts []*engine.Partition
	tps   []TopicPartition
	// MaxBytes bounds the batch bytes one Fetch reads (a single batch
	// larger than it is still read whole). DefaultMaxBytes if not set.
	MaxBytes int

	next  int // the partition the next Fetch reads first, for fairness
	rec   Record
	hdr   batch.Header
	cases []reflect.SelectCase
}

// NewEngineSource returns a source over the given partitions of topic, or
// over all of the topic's partitions (as it has them now) if none are
// given. An unknown topic or partition gives
// engine.ErrUnknownTopicOrPartition.
func NewEngineSource(e *engine.Engine, topic string, partitions ...int) (*EngineSource, error) {
	if len(partitions) == 0 {
		n, ok := e.Topics()[topic]
		if !ok {
			return nil, fmt.Errorf("cannot read topic %q: %w", topic, engine.ErrUnknownTopicOrPartition)
		}
		for i := range n {
			partitions = append(partitions, i)
		}
	}
	s := &EngineSource{c: e.NewConsumer("", engine.ReadCommitted)}
	for _, i := range partitions {
		p, err := e.Partition(topic, i)
		if err != nil {
			return nil, fmt.Errorf("cannot read partition %s-%d: %w", topic, i, err)
		}
		s.parts = append(s.parts, p)
		s.tps = append(s.tps, TopicPartition{Topic: topic, Partition: int32(i)})
	}
	return s, nil
}

// Partitions implements Source.
func (s *EngineSource) Partitions() []TopicPartition { return s.tps }

// Seek implements Source: FromStart is the partition's log start. An
// offset outside the log fails at the next Fetch, with
// partition.ErrOffsetOutOfRange.
func (s *EngineSource) Seek(tp TopicPartition, offset int64) error {
	for i, t := range s.tps {
		if t == tp {
			p := s.parts[i]
			if offset == FromStart {
				offset = p.LogStartOffset()
			}
			s.c.Seek(p, offset)
			return nil
		}
	}
	return fmt.Errorf("cannot seek %s-%d: not read by this source: %w", tp.Topic, tp.Partition, engine.ErrUnknownTopicOrPartition)
}

// Fetch implements Source. It reads the partitions in turn, starting one
// further each time so that a busy partition does not starve the others,
// until MaxBytes of records are in f; with nothing to read it waits for
// any partition's high watermark (or last stable offset) to move.
func (s *EngineSource) Fetch(ctx context.Context, f *Fetched) error {
	maxBytes := s.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	f.Reset()
	for {
		// The channels are taken before the reads (Partition.Advanced's
		// rule), so that an append between a read and the wait still
		// wakes the wait.
		s.cases = s.cases[:0]
		s.cases = append(s.cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())})
		for _, p := range s.parts {
			s.cases = append(s.cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(p.Advanced())})
		}
		moved := false
		for k := range s.parts {
			i := (s.next + k) % len(s.parts)
			ok, err := s.read(i, f, maxBytes-f.size())
			if err != nil {
				return err
			}
			moved = moved || ok
			if f.size() >= maxBytes {
				break
			}
		}
		if len(s.parts) > 0 {
			s.next = (s.next + 1) % len(s.parts)
		}
		if moved {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if chosen, _, _ := reflect.Select(s.cases); chosen == 0 {
			return ctx.Err()
		}
	}
}

// read polls partition i for up to maxBytes into f and reports whether
// its position moved.
func (s *EngineSource) read(i int, f *Fetched, maxBytes int) (bool, error) {
	p, tp := s.parts[i], s.tps[i]
	before := s.c.Position(p)
	s.rec.TopicPartition = tp
	_, err := s.c.Poll(p, max(maxBytes, 1), func(r *batch.Record) error {
		s.rec.Offset, s.rec.Timestamp, s.rec.Key, s.rec.Value = r.Offset, r.Timestamp, r.Key, r.Value
		s.rec.Headers = s.rec.Headers[:0]
		for it := r.Headers(); it.Next(&s.hdr); {
			s.rec.Headers = append(s.rec.Headers, Header{Key: s.hdr.Key, Value: s.hdr.Value})
		}
		f.Add(&s.rec)
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("cannot read %s-%d at %d: %w", tp.Topic, tp.Partition, before, err)
	}
	after := s.c.Position(p)
	if after == before {
		return false, nil
	}
	f.SetNext(tp, after)
	return true, nil
}
