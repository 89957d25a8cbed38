package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/internal/testutil"
	"github.com/idemlog/idemlog/partition"
	"github.com/idemlog/idemlog/producer"
	"github.com/idemlog/idemlog/segment"
)

func readCommittedBatch(t *testing.T, pid int64, seq int32, txn bool, vals []uint32) []byte {
	t.Helper()
	return testutil.Batch(t, testutil.BatchSpec{Producer: pid >= 0, PID: pid, Seq: seq, Transactional: txn, Records: len(vals),
		Value: func(i int) []byte { return binary.BigEndian.AppendUint32(nil, vals[i]) }, Timestamp: time.Now().UnixMilli()})
}

// A random model of transactional and plain writes, read back by a
// read_committed Consumer with random fetch sizes over small segments: the
// consumer must see exactly the plain records and the committed ones, in
// offset order.
func TestReadCommittedModel(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 200; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { readCommittedModel(t, seed) })
	}
}

func readCommittedModel(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 7))
	dir := t.TempDir()
	opts := Options{Partition: partition.Options{Segment: segment.Options{MaxBytes: int64(300 + r.IntN(1500)), IndexMaxBytes: 1024, IndexIntervalBytes: int64(64 + r.IntN(300))}}}
	e := openEngine(t, dir, opts)
	defer func() { e.Close() }()
	e.CreateTopic("t", 1)
	p, _ := e.Partition("t", 0)
	const nprod = 4
	seq := make([]int32, nprod)
	open := make([][]uint32, nprod) // values of open txns
	inTxn := make([]bool, nprod)
	type rec struct {
		off int64
		v   uint32
	}
	var visible []rec
	offOf := map[uint32]int64{}
	next := uint32(1)
	readCheck := func(what string) {
		ls := p.log.LogStartOffset()
		lso := p.LastStableOffset()
		var want []rec
		for _, v := range visible {
			if v.off >= ls && v.off < lso {
				want = append(want, v)
			}
		}
		for i := 1; i < len(want); i++ {
			for j := i; j > 0 && want[j].off < want[j-1].off; j-- {
				want[j], want[j-1] = want[j-1], want[j]
			}
		}
		c := e.NewConsumer("", ReadCommitted)
		if err := c.Assign(p); err != nil {
			t.Fatal(err)
		}
		var got []rec
		for c.Position(p) < lso {
			before := c.Position(p)
			_, err := c.Poll(p, 1+r.IntN(700), func(rc *batch.Record) error {
				if rc.Offset >= ls && rc.Offset < lso {
					got = append(got, rec{rc.Offset, binary.BigEndian.Uint32(rc.Value)})
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if c.Position(p) <= before {
				t.Fatalf("no progress at %d", before)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: read_committed [%d,%d) saw\n%v\nwant\n%v", what, ls, lso, got, want)
		}
	}
	for op := 0; op < 150; op++ {
		if r.IntN(8) == 0 {
			readCheck(fmt.Sprint("op ", op))
		}
		if testing.Verbose() && seedTrace {
			t.Logf("op %d hw %d ls %d", op, p.log.HighWatermark(), p.log.LogStartOffset())
		}
		switch k := r.IntN(10); {
		case k < 5:
			pi := r.IntN(nprod)
			n := 1 + r.IntN(4)
			vals := make([]uint32, n)
			for i := range vals {
				vals[i] = next
				next++
			}
			if seedTrace {
				t.Logf("txn append pid %d seq %d n %d", pi+1, seq[pi], n)
			}
			res, err := p.Append(readCommittedBatch(t, int64(pi+1), seq[pi], true, vals))
			if errors.Is(err, producer.ErrOutOfOrderSequence) && !inTxn[pi] {
				// spec 2.3 rule 4: only a marker survived (DeleteRecords + restart)
				seq[pi] = 0
				res, err = p.Append(readCommittedBatch(t, int64(pi+1), seq[pi], true, vals))
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range vals {
				offOf[v] = res.BaseOffset + int64(i)
			}
			seq[pi] += int32(n)
			open[pi] = append(open[pi], vals...)
			inTxn[pi] = true
		case k < 6:
			vals := []uint32{next}
			next++
			res, err := p.Append(readCommittedBatch(t, -1, 0, false, vals))
			if err != nil {
				t.Fatal(err)
			}
			visible = append(visible, rec{res.BaseOffset, vals[0]})
		case k < 9:
			pi := r.IntN(nprod)
			if !inTxn[pi] {
				continue
			}
			commit := r.IntN(2) == 0
			if seedTrace {
				t.Logf("marker pid %d commit %v", pi+1, commit)
			}
			if _, err := p.writeMarkerDurable(producer.Marker{ProducerID: int64(pi + 1), Commit: commit}); err != nil {
				t.Fatal(err)
			}
			if commit {
				for _, v := range open[pi] {
					visible = append(visible, rec{offOf[v], v})
				}
			}
			open[pi], inTxn[pi] = nil, false
		case k == 9 && r.IntN(2) == 0:
			hw := p.log.HighWatermark()
			ls := p.log.LogStartOffset()
			if hw > ls {
				to := ls + int64(r.IntN(int(hw-ls)+1))
				if seedTrace {
					t.Logf("DeleteRecordsBefore(%d)", to)
				}
				if err := p.log.DeleteRecordsBefore(to); err != nil {
					t.Fatal(err)
				}
			}
		default:
			kill := r.IntN(2) == 0
			if seedTrace {
				t.Logf("restart kill=%v", kill)
			}
			if kill {
				e.kill()
			} else if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			e = openEngine(t, dir, opts)
			p, _ = e.Partition("t", 0)
		}
	}
	for pi := range nprod {
		if inTxn[pi] {
			commit := r.IntN(2) == 0
			if _, err := p.writeMarkerDurable(producer.Marker{ProducerID: int64(pi + 1), Commit: commit}); err != nil {
				t.Fatal(err)
			}
			if commit {
				for _, v := range open[pi] {
					visible = append(visible, rec{offOf[v], v})
				}
			}
		}
	}
	// expected in offset order
	for i := 1; i < len(visible); i++ {
		for j := i; j > 0 && visible[j].off < visible[j-1].off; j-- {
			visible[j], visible[j-1] = visible[j-1], visible[j]
		}
	}
	ls := p.log.LogStartOffset()
	for len(visible) > 0 && visible[0].off < ls {
		visible = visible[1:]
	}
	for round := 0; round < 3; round++ {
		c := e.NewConsumer("", ReadCommitted)
		if err := c.Assign(p); err != nil {
			t.Fatal(err)
		}
		var got []rec
		for c.Position(p) < p.LastStableOffset() {
			before := c.Position(p)
			_, err := c.Poll(p, 1+r.IntN(700), func(rc *batch.Record) error {
				if rc.Offset >= ls { // records below the position: see TestConsumerDeliversRecordsBelowPosition
					got = append(got, rec{rc.Offset, binary.BigEndian.Uint32(rc.Value)})
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if c.Position(p) <= before {
				t.Fatalf("no progress at %d", before)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(visible) {
			t.Fatalf("round %d: read_committed saw\n%v\nwant\n%v", round, got, visible)
		}
	}
}

// Kafka's consumer drops the records of a fetched batch below its fetch
// position (CompletedFetch: record.offset() >= nextFetchOffset). Consumer
// delivers every record of the first batch, so a position inside a batch
// (a log start that DeleteRecordsBefore moved into it, or a committed offset
// inside it) re-delivers, or delivers deleted, records.
func TestConsumerDeliversRecordsBelowPosition(t *testing.T) {
	t.Parallel()
	for _, iso := range []Isolation{ReadUncommitted, ReadCommitted} {
		e := openEngine(t, t.TempDir(), Options{})
		e.CreateTopic("t", 1)
		p, _ := e.Partition("t", 0)
		if _, err := p.Append(readCommittedBatch(t, -1, 0, false, []uint32{0, 1, 2, 3, 4})); err != nil {
			t.Fatal(err)
		}
		if err := p.log.DeleteRecordsBefore(3); err != nil {
			t.Fatal(err)
		}
		c := e.NewConsumer("", iso)
		if err := c.Assign(p); err != nil {
			t.Fatal(err)
		}
		var got []int64
		if _, err := c.Poll(p, 1<<20, func(r *batch.Record) error {
			got = append(got, r.Offset)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		e.Close()
		if fmt.Sprint(got) != "[3 4]" {
			t.Errorf("isolation %d: position 3 (log start), Poll delivered offsets %v; want [3 4]", iso, got)
		}
	}
}

var seedTrace = false
