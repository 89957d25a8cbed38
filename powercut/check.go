package powercut

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/logdump"
)

// Recover opens the data dir, which runs every recovery (partitions,
// producer state, the transaction coordinator), reports "recovered", and
// waits to be killed: the parent cuts the power during or after recovery.
func Recover(cfg Config, r *Reporter) error {
	r.Printf("recovering")
	e, err := engine.Open(cfg.Dir, cfg.EngineOptions())
	if err != nil {
		r.Printf("openfail %s", oneLine(err))
		return err
	}
	if _, err := e.Frontend().Coordinator(); err != nil {
		r.Printf("error coordinator: %s", oneLine(err))
	}
	r.Printf("recovered")
	select {}
}

// cutSwaps counts the partition directories of the data dir that hold a
// cleaning's temporary files (.cleaned, .swap, .deleted): swaps the power
// cut. It changes nothing: verify and then the open judge the image as
// the cut left it.
func cutSwaps(dir string) (int, error) {
	parts, err := os.ReadDir(dir)
	if err != nil {
		return 0, nil // no data dir: nothing to count
	}
	n := 0
	for _, p := range parts {
		if !p.IsDir() {
			continue
		}
		pdir := filepath.Join(dir, p.Name())
		files, err := os.ReadDir(pdir)
		if err != nil {
			continue
		}
		for _, f := range files {
			name := f.Name()
			if strings.HasSuffix(name, ".swap") || strings.HasSuffix(name, ".cleaned") || strings.HasSuffix(name, ".deleted") {
				n++
				break
			}
		}
	}
	return n, nil
}

// reinitBound is how long the checker tries to re-initialise each
// transactional id: past it, the id is wedged.
const reinitBound = 3 * TxnTimeout

// Check reports what a data dir holds after a power cut, for the parent
// to compare with what was acknowledged:
//
//	verify ok SUMMARY | verify error TEXT      logdump.Verify of the crash image
//	verify absent                              (no data dir survived)
//	openfail TEXT                              engine.Open failed
//	reinit ID PID EPOCH MS | wedged ID TEXT    NewTransactionalProducer per id
//	part TOPIC P START HW LSO                  once every id was re-initialised
//	pinned TOPIC P LSO HW                      LSO still below HW past the bound
//	batch TOPIC P HEX                          every batch from the log start
//	visible TOPIC P A-B,C-D                    offsets read_committed shows
//	offset GROUP TOPIC P OFFSET                committed offsets
//	kv KEY SEQ                                 the compacted topic's newest value per key
//	unstable GROUP TEXT                        a require-stable fetch refused
//	pid PID EPOCH check                        a new producer id
//	done
func Check(cfg Config, r *Reporter) error {
	var out bytes.Buffer
	// A cleaning's swap cut by the power is verified as the cut left it:
	// logdump.Verify applies the rules partition.Open completes or rolls
	// back such a swap by, and the open that follows must agree.
	if n, err := cutSwaps(cfg.Dir); err != nil {
		r.Printf("error swaps: %s", oneLine(err))
	} else if n > 0 {
		r.Printf("swaps %d", n)
	}
	if _, err := os.Stat(cfg.Dir); errors.Is(err, os.ErrNotExist) {
		// Nothing to judge: the loss itself is what the other checks count.
		r.Printf("verify absent")
	} else if sum, err := logdump.Verify(&out, cfg.Dir, logdump.VerifyOptions{}); err != nil {
		r.Printf("verify error %s", oneLine(err))
	} else {
		r.Printf("verify ok %s", strings.ReplaceAll(sum.String(), "\n", " "))
	}
	e, err := engine.Open(cfg.Dir, cfg.EngineOptions())
	if err != nil {
		r.Printf("openfail %s", oneLine(err))
		return err
	}
	defer e.Close()
	// The ids are tried at once, so that a wedged one costs the bound
	// once, not once per id.
	lines := make([]string, len(TxnIDs))
	var wg sync.WaitGroup
	for i, id := range TxnIDs {
		wg.Go(func() {
			start := time.Now()
			for {
				tp, err := e.NewTransactionalProducer(id, TxnTimeout)
				if err == nil {
					pid, epoch := tp.ID()
					lines[i] = fmt.Sprintf("reinit %s %d %d %d", id, pid, epoch, time.Since(start).Milliseconds())
					return
				}
				if time.Since(start) > reinitBound {
					lines[i] = fmt.Sprintf("wedged %s %s", id, oneLine(err))
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	for _, l := range lines {
		r.Printf("%s", l)
	}
	// Every id was fenced above, which aborts its open transaction: every
	// partition's last stable offset must reach its high watermark.
	deadline := time.Now().Add(reinitBound)
	for _, p := range e.Partitions() {
		for p.LastStableOffset() < p.HighWatermark() && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		lso, hw := p.LastStableOffset(), p.HighWatermark()
		if lso < hw {
			r.Printf("pinned %s %d %d %d", p.Topic(), p.Index(), lso, hw)
		}
		r.Printf("part %s %d %d %d %d", p.Topic(), p.Index(), p.LogStartOffset(), hw, lso)
		if engine.IsInternalTopic(p.Topic()) {
			continue
		}
		if p.Topic() == topicKV {
			if err := dumpKV(p, r); err != nil {
				r.Printf("error read %s/%d: %s", p.Topic(), p.Index(), oneLine(err))
			}
			continue
		}
		if err := dumpBatches(p, r); err != nil {
			r.Printf("error read %s/%d: %s", p.Topic(), p.Index(), oneLine(err))
		}
		if p.Topic() == topicTxn {
			if err := dumpVisible(e, p, r); err != nil {
				r.Printf("error read_committed %s/%d: %s", p.Topic(), p.Index(), oneLine(err))
			}
		}
	}
	groups := []string{groupPlain, groupReader}
	for _, id := range TxnIDs {
		groups = append(groups, txnGroup(id))
	}
	for _, g := range groups {
		offs, err := e.Frontend().FetchOffsets(g, nil, false)
		if err != nil {
			r.Printf("error FetchOffsets %s: %s", g, oneLine(err))
			continue
		}
		for tp, o := range offs {
			r.Printf("offset %s %s %d %d", g, tp.Topic, tp.Partition, o.Offset)
		}
		if _, err := e.Frontend().FetchOffsets(g, nil, true); errors.Is(err, engine.ErrUnstableOffsetCommit) {
			r.Printf("unstable %s %s", g, oneLine(err))
		}
	}
	pid, epoch, err := e.Frontend().InitProducerID()
	if err != nil {
		r.Printf("error InitProducerID: %s", oneLine(err))
	} else {
		r.Printf("pid %d %d check", pid, epoch)
	}
	r.Printf("done")
	return nil
}

func dumpBatches(p *engine.Partition, r *Reporter) error {
	off := p.LogStartOffset()
	for {
		c, err := p.Read(off, 1<<20)
		if err != nil {
			return err
		}
		batches := batch.NewIter(c.Data)
		for batches.Next() {
			r.Printf("batch %s %d %s", p.Topic(), p.Index(), hex.EncodeToString(batches.Batch()))
		}
		if err := batches.Err(); err != nil {
			c.Release()
			return err
		}
		next := c.NextOffset
		empty := len(c.Data) == 0
		c.Release()
		if empty || next <= off {
			return nil
		}
		off = next
	}
}

// dumpKV reports the newest value of every key of the compacted topic,
// reading it from the log start (offsets must rise: a cleaning never
// duplicates or reorders).
func dumpKV(p *engine.Partition, r *Reporter) error {
	newest := map[string]string{}
	var dec batch.Decoder
	prev := int64(-1)
	for off := p.LogStartOffset(); off < p.HighWatermark(); {
		c, err := p.Read(off, 1<<20)
		if err != nil {
			return err
		}
		bi := batch.NewIter(c.Data)
		for bi.Next() {
			it, err := dec.Records(bi.Batch())
			if err != nil {
				c.Release()
				return err
			}
			var rec batch.Record
			for it.Next(&rec) {
				if rec.Offset <= prev {
					r.Printf("error kv record at %d after %d", rec.Offset, prev)
				}
				prev = rec.Offset
				newest[string(rec.Key)] = string(rec.Value)
			}
		}
		if err := bi.Err(); err != nil {
			c.Release()
			return err
		}
		next := c.NextOffset
		c.Release()
		if next <= off {
			break
		}
		off = next
	}
	for k, v := range newest {
		r.Printf("kv %s %s", k, v)
	}
	return nil
}

// dumpVisible reports the offsets a read_committed consumer gets, as
// ranges, by reading the partition through a consumer of a group that
// never commits.
func dumpVisible(e *engine.Engine, p *engine.Partition, r *Reporter) error {
	c := e.NewConsumer("powercut-check", engine.ReadCommitted)
	if err := c.Assign(p); err != nil {
		return err
	}
	var ranges []string
	first, last := int64(-1), int64(-1)
	flush := func() {
		if first >= 0 {
			ranges = append(ranges, fmt.Sprintf("%d-%d", first, last))
		}
	}
	for {
		pos := c.Position(p)
		n, err := c.Poll(p, 1<<20, func(rec *batch.Record) error {
			if rec.Offset != last+1 || first < 0 {
				flush()
				first = rec.Offset
			}
			last = rec.Offset
			return nil
		})
		if err != nil {
			return err
		}
		if n == 0 && (c.Position(p) >= p.LastStableOffset() || c.Position(p) == pos) {
			break
		}
	}
	flush()
	if len(ranges) == 0 {
		ranges = []string{"none"}
	}
	r.Printf("visible %s %d %s", p.Topic(), p.Index(), strings.Join(ranges, ","))
	return nil
}
