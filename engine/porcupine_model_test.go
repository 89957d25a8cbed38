package engine

import (
	"fmt"
	"math"
	"strings"

	"github.com/anishathalye/porcupine"
)

// A sequential model of one partition's idempotent-producer rules
// (docs/SEMANTICS.md §2.3), written independently of package producer,
// for the porcupine linearizability check in linearizability_test.go.
//
// The state is a plain value (fixed arrays, no maps or pointers): Step
// copies it by assignment, so the model is purely functional, and == is
// its equality.

const (
	// linMaxProducers is the most producers one history may use; a
	// producer is named in the model by its slot, 0..linMaxProducers-1.
	linMaxProducers = 4
	// linCacheSize is Kafka's per-producer batch cache.
	linCacheSize = 5
)

// linErrKind is the class of an append's error.
type linErrKind uint8

const (
	linErrNone linErrKind = iota
	linErrOutOfOrder
	linErrFenced
	// linErrOther is any other error: the model never produces it, so it
	// always makes a history illegal.
	linErrOther
)

func (k linErrKind) String() string {
	return [...]string{"none", "OUT_OF_ORDER", "FENCED", "OTHER"}[k]
}

// linInput is one Partition.Append of an idempotent batch.
type linInput struct {
	Slot     int // the producer's slot in the model
	PID      int64
	Epoch    int16
	FirstSeq int32
	Count    int32
}

// linOutput is what the append answered.
type linOutput struct {
	OK   bool
	Dup  bool
	Base int64
	Last int64
	Err  linErrKind
}

type linCached struct {
	first, last   int32 // sequences
	base, lastOff int64 // offsets
}

type linProducer struct {
	known bool
	epoch int16
	n     uint8                   // cached batches
	cache [linCacheSize]linCached // oldest first
}

type linState struct {
	leo   int64
	prods [linMaxProducers]linProducer
}

// linMutation deliberately breaks the model, to show that the check can
// fail (TestLinearizabilityCatchesBrokenModel).
type linMutation int

const (
	linCorrect     linMutation = iota
	linMutNoDedup              // duplicates are treated as new batches
	linMutNoFence              // a lower epoch is treated as a new epoch
	linMutOffByOne             // appends start one past the log end
)

// linLastSeq is first+count-1 with Kafka's wrap after MaxInt32.
func linLastSeq(first, count int32) int32 {
	d := count - 1
	if first > math.MaxInt32-d {
		return d - (math.MaxInt32 - first) - 1
	}
	return first + d
}

// linNextSeq is the sequence after s.
func linNextSeq(s int32) int32 {
	if s == math.MaxInt32 {
		return 0
	}
	return s + 1
}

// linApply runs one append against the model: the answer it must get, and
// the state after it. s is a copy; changing it does not touch the caller's.
func linApply(s linState, in linInput, mut linMutation) (linOutput, linState) {
	p := &s.prods[in.Slot]
	last := linLastSeq(in.FirstSeq, in.Count)
	if p.known && in.Epoch == p.epoch && mut != linMutNoDedup {
		for _, c := range p.cache[:p.n] {
			if c.first == in.FirstSeq && c.last == last {
				return linOutput{OK: true, Dup: true, Base: c.base, Last: c.lastOff}, s
			}
		}
	}
	if p.known {
		switch {
		case in.Epoch < p.epoch && mut != linMutNoFence:
			return linOutput{Err: linErrFenced}, s
		case in.Epoch != p.epoch:
			if in.FirstSeq != 0 {
				return linOutput{Err: linErrOutOfOrder}, s
			}
		case p.n == 0:
			if in.FirstSeq != 0 {
				return linOutput{Err: linErrOutOfOrder}, s
			}
		default:
			if in.FirstSeq != linNextSeq(p.cache[p.n-1].last) {
				return linOutput{Err: linErrOutOfOrder}, s
			}
		}
	}
	// Written: a new producer or epoch restarts the cache.
	base := s.leo
	if mut == linMutOffByOne {
		base++
	}
	out := linOutput{OK: true, Base: base, Last: base + int64(in.Count) - 1}
	s.leo = out.Last + 1
	if !p.known || in.Epoch != p.epoch {
		p.known, p.epoch, p.n = true, in.Epoch, 0
	}
	if p.n == linCacheSize {
		copy(p.cache[:], p.cache[1:])
		p.n--
	}
	p.cache[p.n] = linCached{first: in.FirstSeq, last: last, base: out.Base, lastOff: out.Last}
	p.n++
	return out, s
}

func linModel(mut linMutation) porcupine.Model {
	return porcupine.Model{
		Init: func() interface{} { return linState{} },
		Step: func(state, input, output interface{}) (bool, interface{}) {
			want, next := linApply(state.(linState), input.(linInput), mut)
			if want != output.(linOutput) {
				return false, nil
			}
			return true, next
		},
		Equal: func(a, b interface{}) bool { return a.(linState) == b.(linState) },
		Hash:  linHash,
		DescribeOperation: func(input, output interface{}) string {
			in, out := input.(linInput), output.(linOutput)
			return fmt.Sprintf("pid %d e%d seq %d+%d -> %s", in.PID, in.Epoch, in.FirstSeq, in.Count, out)
		},
		DescribeState: func(state interface{}) string { return state.(linState).String() },
	}
}

func linHash(state interface{}) uint64 {
	s := state.(linState)
	h := uint64(14695981039346656037)
	mix := func(v uint64) { h = (h ^ v) * 1099511628211 }
	mix(uint64(s.leo))
	for _, p := range s.prods {
		if !p.known {
			mix(0)
			continue
		}
		mix(uint64(p.epoch)<<8 | uint64(p.n))
		for _, c := range p.cache[:p.n] {
			mix(uint64(uint32(c.first))<<32 | uint64(uint32(c.last)))
			mix(uint64(c.base))
		}
	}
	return h
}

func (o linOutput) String() string {
	switch {
	case !o.OK:
		return o.Err.String()
	case o.Dup:
		return fmt.Sprintf("dup [%d,%d]", o.Base, o.Last)
	}
	return fmt.Sprintf("[%d,%d]", o.Base, o.Last)
}

func (s linState) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "leo %d", s.leo)
	for i, p := range s.prods {
		if !p.known {
			continue
		}
		fmt.Fprintf(&b, "; slot %d e%d:", i, p.epoch)
		for _, c := range p.cache[:p.n] {
			fmt.Fprintf(&b, " %d..%d@%d", c.first, c.last, c.base)
		}
	}
	return b.String()
}
