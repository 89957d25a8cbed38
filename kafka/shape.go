package kafka

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Decoding bounds. kmsg sizes each array by the count the frame claims,
// checking only that that many bytes remain; every element is a struct of
// tens of bytes, so a frame of N bytes can make it allocate tens of times N.
// Requests other than Produce are small in practice, so their frames are
// capped low (maxSmallFrame), which bounds that at a few tens of MiB. A
// Produce frame may be large (its record batches), so its shape is walked
// first (produceShape): counts must be backed by their elements' real
// minimum sizes, and the partitions in one request are capped.
const (
	maxSmallFrame      = 1 << 20
	maxProducePartions = 1 << 16
)

// ErrRequestShape: array counts in a request that its bytes cannot back,
// or more partitions than one request may carry.
var ErrRequestShape = fmt.Errorf("request shape out of bounds: %w", ErrFrameTruncated)

// checkShape bounds what decoding body (the request after its header) may
// allocate, before kmsg decodes it.
func checkShape(key, version int16, body []byte) error {
	if key != kmsg.Produce.Int16() {
		if len(body) > maxSmallFrame {
			return fmt.Errorf("cannot decode %s of %d bytes (max %d): %w", kmsg.NameForKey(key), len(body), maxSmallFrame, ErrFrameTooLarge)
		}
		return nil
	}
	return produceShape(body, version >= 9)
}

// shapeReader walks a request's encoding without building it.
type shapeReader struct {
	r    kbin.Reader
	flex bool
}

// count reads an array length; min is the smallest encoding of one element.
func (s *shapeReader) count(min int) int {
	var n int
	if s.flex {
		// As kmsg reads it: the uvarint as an int32, so one of 2^31 or
		// more is a negative count (null), and 2^31 itself wraps to a
		// huge one.
		n = int(int32(s.r.Uvarint()) - 1)
	} else {
		n = int(s.r.Int32())
	}
	if n < 0 {
		return 0 // a null array (kmsg reads every negative count as null)
	}
	if n > len(s.r.Src)/min {
		s.r.Src, n = nil, 0
		s.fail()
	}
	return n
}

func (s *shapeReader) fail() { s.r.Span(1 << 30) } // marks the reader bad

func (s *shapeReader) str(nullable bool) {
	if s.flex {
		n := int(s.r.Uvarint()) - 1
		if n < 0 && nullable {
			return
		}
		s.skip(n)
		return
	}
	n := int(s.r.Int16())
	if n < 0 && nullable {
		return
	}
	s.skip(n)
}

func (s *shapeReader) bytes() {
	var n int
	if s.flex {
		n = int(s.r.Uvarint()) - 1
	} else {
		n = int(s.r.Int32())
	}
	if n < 0 {
		return // null (kmsg reads every negative length as null)
	}
	s.skip(n)
}

func (s *shapeReader) skip(n int) {
	if n < 0 {
		s.fail()
		return
	}
	s.r.Span(n)
}

func (s *shapeReader) tags() {
	if !s.flex {
		return
	}
	n := int(s.r.Uvarint())
	if n > len(s.r.Src)/2 {
		s.fail()
		return
	}
	for range n {
		s.r.Uvarint()
		s.skip(int(s.r.Uvarint()))
	}
}

// produceShape walks a Produce request (v3+):
//
//	transactional_id nullable string | acks int16 | timeout int32
//	| [topic: name string | [partition: index int32 | records nullable bytes | tags] | tags]
//	| tags
//
// (flexible versions use compact lengths and add the tag sections).
func produceShape(body []byte, flex bool) error {
	s := shapeReader{r: kbin.Reader{Src: body}, flex: flex}
	s.str(true)
	s.r.Int16()
	s.r.Int32()
	minTopic, minPart := 2+4, 4+4
	if flex {
		minTopic, minPart = 1+1+1, 4+1+1
	}
	parts := 0
	for range s.count(minTopic) {
		s.str(false)
		n := s.count(minPart)
		if parts += n; parts > maxProducePartions {
			return fmt.Errorf("cannot decode produce of more than %d partitions: %w", maxProducePartions, ErrRequestShape)
		}
		for range n {
			s.r.Int32()
			s.bytes()
			s.tags()
		}
		s.tags()
	}
	s.tags()
	if !s.r.Ok() {
		return fmt.Errorf("cannot decode produce: %w", ErrRequestShape)
	}
	return nil
}
