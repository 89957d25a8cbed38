package powercut

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/engine"
)

// Workload runs the mixed workload on the public engine API until the
// process is killed, reporting every acknowledgement on r as it comes:
//
//	ready
//	topic NAME PARTITIONS          a topic exists (created or found)
//	topicdeleting NAME             DeleteTopic about to be called
//	topicdel NAME                  DeleteTopic returned
//	pid PID EPOCH OWNER            a producer id handed out
//	send SID TOPIC P HEX           a raw batch about to be appended
//	ack SID BASE LAST DUP          ... and its acknowledgement
//	nack SID ERROR                 ... or its failure
//	psend TOPIC P BASE LAST PID EPOCH  engine.Producer.Send returned
//	txsend ID NO TOPIC P BASE LAST PID EPOCH
//	txoffsets ID NO GROUP TOPIC P OFFSET
//	txend ID NO commit|abort       Commit or Abort about to be called
//	txdone ID NO commit|abort      ... and returned nil
//	committing GROUP TOPIC P OFFSET / commit GROUP TOPIC P OFFSET
//	delrec TOPIC P LOW             DeleteRecordsBefore returned LOW
//	kvsend KEY SEQ / kvack KEY SEQ a keyed record of the compacted topic
//	                               about to be appended / acknowledged
//	error TEXT                     anything unexpected
//
// It returns only if it cannot start.
func Workload(cfg Config, r *Reporter) error {
	e, err := engine.Open(cfg.Dir, cfg.EngineOptions())
	if err != nil {
		r.Printf("openfail %s", oneLine(err))
		return err
	}
	w := &workload{cfg: cfg, e: e, r: r}
	// Numbers handed out (send ids, offsets committed) rise across the
	// stages of a trial.
	w.sid.Store(int64(cfg.Stage) * 1_000_000_000)
	if err := w.createTopics(); err != nil {
		r.Printf("error %s", oneLine(err))
		return err
	}
	if err := w.retry(); err != nil {
		r.Printf("error %s", oneLine(err))
		return err
	}
	r.Printf("ready")
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Go(func() { w.idempotent(g) })
	}
	wg.Go(w.producer)
	wg.Go(func() { w.transactional(TxnIDs[0]) })
	wg.Go(func() { w.transactional(TxnIDs[1]) })
	wg.Go(w.transactionalV1)
	wg.Go(w.commits)
	wg.Go(w.deletions)
	wg.Go(w.keyed)
	wg.Wait()
	return nil
}

type workload struct {
	cfg Config
	e   *engine.Engine
	r   *Reporter
	sid atomic.Int64
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", " | ") }

func (w *workload) rand(stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(w.cfg.Seed, uint64(w.cfg.Stage)<<32|stream))
}

func (w *workload) createTopics() error {
	create := func(name string, parts int, cfg map[string]string) error {
		err := w.e.CreateTopic(name, parts, cfg)
		if err != nil && !errors.Is(err, engine.ErrTopicAlreadyExists) {
			return fmt.Errorf("cannot create topic %s: %w", name, err)
		}
		w.r.Printf("topic %s %d", name, parts)
		return nil
	}
	if err := create(topicIdem, idemParts, nil); err != nil {
		return err
	}
	if err := create(topicRetention, 1, map[string]string{"retention.bytes": strconv.Itoa(retentionBytes)}); err != nil {
		return err
	}
	// Small segments and a low dirty ratio: the cleaner runs (and swaps
	// segments) many times a stage.
	if err := create(topicKV, 1, map[string]string{"cleanup.policy": "compact", "segment.bytes": "4096",
		"min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "100"}); err != nil {
		return err
	}
	return create(topicTxn, txnParts, nil)
}

// keyed writes records of kvKeys keys to the compacted topic, each value
// naming its key and a sequence that rises across stages, and reports
// each before and after its append: the checker's newest value of each
// key must be at least the last acknowledged one.
func (w *workload) keyed() {
	rng := w.rand(500)
	p, err := w.e.Partition(topicKV, 0)
	if err != nil {
		w.r.Printf("error %s", oneLine(err))
		return
	}
	bld := batch.NewBuilder(batch.CodecNone)
	for {
		key := rng.IntN(kvKeys)
		seq := w.sid.Add(1)
		bld.Reset(batch.CodecNone)
		bld.Append(time.Now().UnixMilli(), []byte(strconv.Itoa(key)), []byte(strconv.FormatInt(seq, 10)), nil)
		b, err := bld.Build()
		if err != nil {
			w.r.Printf("error build: %s", oneLine(err))
			return
		}
		w.r.Printf("kvsend %d %d", key, seq)
		if _, err := p.Append(append([]byte(nil), b...)); err != nil {
			w.r.Printf("error kv append: %s", oneLine(err))
		} else {
			w.r.Printf("kvack %d %d", key, seq)
		}
		time.Sleep(time.Duration(rng.IntN(4)) * time.Millisecond)
	}
}

// retry sends again, first, the batches the parent lists: each must be
// recognised as a duplicate if its original is in the log.
func (w *workload) retry() error {
	if w.cfg.Retries == "" {
		return nil
	}
	f, err := os.Open(w.cfg.Retries)
	if err != nil {
		return fmt.Errorf("cannot open retries: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var topic, hx string
		var part int
		if _, err := fmt.Sscan(sc.Text(), &topic, &part, &hx); err != nil {
			return fmt.Errorf("cannot parse retry %q: %w", sc.Text(), err)
		}
		raw, err := hex.DecodeString(hx)
		if err != nil {
			return fmt.Errorf("cannot parse retry: %w", err)
		}
		p, err := w.e.Partition(topic, part)
		if err != nil {
			w.r.Printf("error retry %s/%d: %s", topic, part, oneLine(err))
			continue
		}
		w.append(p, raw)
	}
	return sc.Err()
}

// append appends a raw batch, reporting it before and its outcome after.
func (w *workload) append(p *engine.Partition, raw []byte) (engine.AppendResult, error) {
	sid := w.sid.Add(1)
	w.r.Printf("send %d %s %d %s", sid, p.Topic(), p.Index(), hex.EncodeToString(raw))
	// Append may stamp the base offset into the bytes it is given.
	res, err := p.Append(append([]byte(nil), raw...))
	if err != nil {
		w.r.Printf("nack %d %s", sid, oneLine(err))
		return res, err
	}
	dup := 0
	if res.Duplicate {
		dup = 1
	}
	w.r.Printf("ack %d %d %d %d", sid, res.BaseOffset, res.LastOffset, dup)
	return res, nil
}

// fill adds 1 to 4 records whose values name their origin.
func fill(bld *batch.Builder, rng *rand.Rand, tag string) {
	n := 1 + rng.IntN(4)
	for i := range n {
		pad := make([]byte, rng.IntN(600))
		for j := range pad {
			pad[j] = byte('a' + rng.IntN(26))
		}
		bld.Append(time.Now().UnixMilli(), []byte(tag), fmt.Appendf(nil, "%s/%d/%s", tag, i, pad), nil)
	}
}

func codec(rng *rand.Rand) batch.Codec {
	if rng.IntN(4) == 0 {
		return batch.CodecZstd
	}
	return batch.CodecNone
}

// idempotent is a producer on the idempotent and retention topics, which
// sometimes sends a batch twice at once (a retry after a lost response),
// sometimes retires its producer id for a new one, and sometimes deletes
// records.
func (w *workload) idempotent(g int) {
	rng := w.rand(uint64(g))
	var parts []*engine.Partition
	for i := range idemParts {
		p, err := w.e.Partition(topicIdem, i)
		if err != nil {
			w.r.Printf("error %s", oneLine(err))
			return
		}
		parts = append(parts, p)
	}
	ret, err := w.e.Partition(topicRetention, 0)
	if err != nil {
		w.r.Printf("error %s", oneLine(err))
		return
	}
	parts = append(parts, ret)
	bld := batch.NewBuilder(batch.CodecNone)
	for {
		pid, epoch, err := w.e.Frontend().InitProducerID()
		if err != nil {
			w.r.Printf("error InitProducerID: %s", oneLine(err))
			time.Sleep(50 * time.Millisecond)
			continue
		}
		w.r.Printf("pid %d %d idem/%d/%d", pid, epoch, w.cfg.Stage, g)
		seqs := make([]int32, len(parts))
		for n := 0; n < 100+rng.IntN(200); n++ {
			i := rng.IntN(len(parts))
			bld.Reset(codec(rng))
			bld.SetProducer(pid, epoch, seqs[i])
			fill(bld, rng, fmt.Sprintf("idem/%d/%d/%d/%d", w.cfg.Stage, g, pid, seqs[i]))
			b, err := bld.Build()
			if err != nil {
				w.r.Printf("error build: %s", oneLine(err))
				return
			}
			raw := append([]byte(nil), b...)
			if _, err := w.append(parts[i], raw); err != nil {
				break // the producer's sequence is in doubt: take a new id
			}
			seqs[i] = batch.NextSequence(batch.Batch(raw).LastSequence())
			if rng.IntN(8) == 0 {
				// The same bytes again: a duplicate at the same offsets.
				w.append(parts[i], raw)
			}
			// Paced, so that a run's acknowledgements stay in the
			// thousands whatever the policy costs.
			time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
		}
	}
}

// producer sends through engine.Producer, the engine's own idempotent
// producer handle, which numbers the batches itself.
func (w *workload) producer() {
	rng := w.rand(50)
	var parts []*engine.Partition
	for i := range idemParts {
		p, err := w.e.Partition(topicIdem, i)
		if err != nil {
			w.r.Printf("error %s", oneLine(err))
			return
		}
		parts = append(parts, p)
	}
	bld := batch.NewBuilder(batch.CodecNone)
	for {
		pr, err := w.e.NewProducer()
		if err != nil {
			w.r.Printf("error NewProducer: %s", oneLine(err))
			time.Sleep(50 * time.Millisecond)
			continue
		}
		pid, epoch := pr.ID()
		w.r.Printf("pid %d %d idem/%d/handle", pid, epoch, w.cfg.Stage)
		for n := 0; n < 100+rng.IntN(200); n++ {
			p := parts[rng.IntN(len(parts))]
			bld.Reset(codec(rng))
			fill(bld, rng, fmt.Sprintf("handle/%d/%d/%d", w.cfg.Stage, pid, n))
			res, err := pr.Send(p, bld)
			if err != nil {
				w.r.Printf("error Producer.Send: %s", oneLine(err))
				break
			}
			w.r.Printf("psend %s %d %d %d %d %d", p.Topic(), p.Index(), res.BaseOffset, res.LastOffset, pid, epoch)
			time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
		}
	}
}

// transactional runs transactions of one id through
// engine.TransactionalProducer (version 2): batches on both partitions of
// the transactional topic, sometimes the group's offsets, then Commit (3
// in 4) or Abort.
func (w *workload) transactional(id string) {
	rng := w.rand(uint64(100 + len(id) + int(id[len(id)-1])))
	parts := w.txnPartitions()
	if parts == nil {
		return
	}
	bld := batch.NewBuilder(batch.CodecNone)
	for {
		tp, err := w.e.NewTransactionalProducer(id, TxnTimeout)
		if err != nil {
			w.r.Printf("error NewTransactionalProducer %s: %s", id, oneLine(err))
			time.Sleep(100 * time.Millisecond)
			continue
		}
		pid, epoch := tp.ID()
		w.r.Printf("pid %d %d tx/%s", pid, epoch, id)
		for failed := false; !failed; {
			no := fmt.Sprintf("%d.%d", w.cfg.Stage, w.sid.Add(1))
			for range 1 + rng.IntN(3) {
				p := parts[rng.IntN(len(parts))]
				bld.Reset(codec(rng))
				fill(bld, rng, "tx/"+id+"/"+no)
				pid, epoch := tp.ID()
				res, err := tp.Send(p, bld)
				if err != nil {
					w.r.Printf("error txn send %s: %s", id, oneLine(err))
					failed = true
					break
				}
				w.r.Printf("txsend %s %s %s %d %d %d %d %d", id, no, p.Topic(), p.Index(), res.BaseOffset, res.LastOffset, pid, epoch)
			}
			if !failed && rng.IntN(2) == 0 {
				part := rng.IntN(idemParts)
				off := w.sid.Add(1)
				tpo := engine.TopicPartition{Topic: topicIdem, Partition: int32(part)}
				if err := tp.SendOffsets(txnGroup(id), map[engine.TopicPartition]engine.OffsetAndMetadata{tpo: {Offset: off}}); err != nil {
					w.r.Printf("error txn offsets %s: %s", id, oneLine(err))
					failed = true
				} else {
					w.r.Printf("txoffsets %s %s %s %s %d %d", id, no, txnGroup(id), topicIdem, part, off)
				}
			}
			commit := !failed && rng.IntN(4) != 0
			verb := map[bool]string{true: "commit", false: "abort"}[commit]
			w.r.Printf("txend %s %s %s", id, no, verb)
			if commit {
				err = tp.Commit()
			} else {
				err = tp.Abort()
			}
			if err != nil {
				w.r.Printf("error txn %s %s: %s", verb, id, oneLine(err))
				break
			}
			w.r.Printf("txdone %s %s %s", id, no, verb)
			if np, ne := tp.ID(); np != pid {
				pid = np
				w.r.Printf("pid %d %d tx/%s", np, ne, id)
			}
		}
	}
}

func (w *workload) txnPartitions() []*engine.Partition {
	var parts []*engine.Partition
	for i := range txnParts {
		p, err := w.e.Partition(topicTxn, i)
		if err != nil {
			w.r.Printf("error %s", oneLine(err))
			return nil
		}
		parts = append(parts, p)
	}
	return parts
}

// transactionalV1 runs transactions of one id through the coordinator's
// own calls with transaction version 1 (AddPartitions before writing, the
// epoch kept across transactions), writing raw batches, so that their
// bytes are checked too.
func (w *workload) transactionalV1() {
	id := TxnIDs[2]
	rng := w.rand(200)
	parts := w.txnPartitions()
	if parts == nil {
		return
	}
	c, err := w.e.Frontend().Coordinator()
	if err != nil {
		w.r.Printf("error %s", oneLine(err))
		return
	}
	bld := batch.NewBuilder(batch.CodecNone)
	for {
		var pid int64
		var epoch int16
		deadline := time.Now().Add(3 * TxnTimeout)
		for {
			pid, epoch, err = c.InitProducerID(id, TxnTimeout)
			if err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			w.r.Printf("error InitProducerID %s: %s", id, oneLine(err))
			continue
		}
		w.r.Printf("pid %d %d tx/%s", pid, epoch, id)
		seqs := make([]int32, len(parts))
		for failed := false; !failed; {
			no := fmt.Sprintf("%d.%d", w.cfg.Stage, w.sid.Add(1))
			for range 1 + rng.IntN(3) {
				i := rng.IntN(len(parts))
				p := parts[i]
				ref := engine.TopicPartition{Topic: p.Topic(), Partition: int32(i)}
				if err := c.AddPartitions(id, pid, epoch, []engine.TopicPartition{ref}, false); err != nil {
					w.r.Printf("error AddPartitions %s: %s", id, oneLine(err))
					failed = true
					break
				}
				bld.Reset(codec(rng))
				bld.SetProducer(pid, epoch, seqs[i])
				bld.SetTransactional(true)
				fill(bld, rng, "tx/"+id+"/"+no)
				b, err := bld.Build()
				if err != nil {
					w.r.Printf("error build: %s", oneLine(err))
					return
				}
				raw := append([]byte(nil), b...)
				res, err := w.append(p, raw)
				if err != nil {
					failed = true
					break
				}
				seqs[i] = batch.NextSequence(batch.Batch(raw).LastSequence())
				w.r.Printf("txsend %s %s %s %d %d %d %d %d", id, no, p.Topic(), i, res.BaseOffset, res.LastOffset, pid, epoch)
			}
			commit := !failed && rng.IntN(4) != 0
			verb := map[bool]string{true: "commit", false: "abort"}[commit]
			w.r.Printf("txend %s %s %s", id, no, verb)
			np, ne, err := c.EndTxn(id, pid, epoch, commit)
			if err != nil {
				w.r.Printf("error EndTxn %s: %s", id, oneLine(err))
				break
			}
			w.r.Printf("txdone %s %s %s", id, no, verb)
			if np != pid || ne != epoch {
				pid, epoch = np, ne
				seqs = make([]int32, len(parts))
				w.r.Printf("pid %d %d tx/%s", pid, epoch, id)
			}
		}
	}
}

// commits commits offsets of the plain group, rising, outside
// transactions, and those of the reader group through engine.Consumer:
// one consumer per partition, which polls and commits its position.
func (w *workload) commits() {
	rng := w.rand(300)
	readers := make([]*engine.Consumer, idemParts)
	for n := 0; ; n++ {
		part := rng.IntN(idemParts)
		if n%4 == 3 {
			w.read(readers, part)
		} else {
			off := w.sid.Add(1)
			w.r.Printf("committing %s %s %d %d", groupPlain, topicIdem, part, off)
			tp := engine.TopicPartition{Topic: topicIdem, Partition: int32(part)}
			if err := w.e.Frontend().CommitOffsets(groupPlain, map[engine.TopicPartition]engine.OffsetAndMetadata{tp: {Offset: off}}); err != nil {
				w.r.Printf("error CommitOffsets: %s", oneLine(err))
			} else {
				w.r.Printf("commit %s %s %d %d", groupPlain, topicIdem, part, off)
			}
		}
		time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
	}
}

// read polls partition part of the idempotent topic with its reader and
// commits the reader's position; a reader that fails (its position fell
// below a DeleteRecords) is replaced, and starts again from the group's
// committed offset.
func (w *workload) read(readers []*engine.Consumer, part int) {
	p, err := w.e.Partition(topicIdem, part)
	if err != nil {
		w.r.Printf("error %s", oneLine(err))
		return
	}
	c := readers[part]
	if c == nil {
		c = w.e.NewConsumer(groupReader, engine.ReadCommitted)
		if err := c.Assign(p); err != nil {
			w.r.Printf("error Assign: %s", oneLine(err))
			return
		}
		readers[part] = c
	}
	if _, err := c.Poll(p, 64<<10, func(*batch.Record) error { return nil }); err != nil {
		readers[part] = nil
		return
	}
	pos := c.Position(p)
	w.r.Printf("committing %s %s %d %d", groupReader, topicIdem, part, pos)
	if err := c.Commit(); err != nil {
		w.r.Printf("error Consumer.Commit: %s", oneLine(err))
		readers[part] = nil
		return
	}
	w.r.Printf("commit %s %s %d %d", groupReader, topicIdem, part, pos)
}

// deletions deletes records below a partition's high watermark now and
// then, and creates, writes and deletes whole topics.
func (w *workload) deletions() {
	rng := w.rand(400)
	bld := batch.NewBuilder(batch.CodecNone)
	for n := 0; ; n++ {
		time.Sleep(time.Duration(20+rng.IntN(60)) * time.Millisecond)
		if rng.IntN(2) == 0 {
			p, err := w.e.Partition(topicIdem, rng.IntN(idemParts))
			if err != nil {
				w.r.Printf("error %s", oneLine(err))
				continue
			}
			hw := p.HighWatermark()
			if hw == 0 {
				continue
			}
			low, err := p.DeleteRecordsBefore(rng.Int64N(hw))
			if err != nil {
				w.r.Printf("error DeleteRecordsBefore: %s", oneLine(err))
				continue
			}
			w.r.Printf("delrec %s %d %d", p.Topic(), p.Index(), low)
			continue
		}
		name := fmt.Sprintf("%s%d-%d", topicTmpPrefix, w.cfg.Stage, n)
		if err := w.e.CreateTopic(name, 1); err != nil {
			w.r.Printf("error CreateTopic %s: %s", name, oneLine(err))
			continue
		}
		w.r.Printf("topic %s 1", name)
		p, err := w.e.Partition(name, 0)
		if err != nil {
			w.r.Printf("error %s", oneLine(err))
			continue
		}
		bld.Reset(batch.CodecNone)
		fill(bld, rng, name)
		b, err := bld.Build()
		if err != nil {
			w.r.Printf("error build: %s", oneLine(err))
			continue
		}
		if _, err := w.append(p, append([]byte(nil), b...)); err != nil {
			continue
		}
		if rng.IntN(3) == 0 {
			continue // kept
		}
		w.r.Printf("topicdeleting %s", name)
		if err := w.e.DeleteTopic(name); err != nil {
			w.r.Printf("error DeleteTopic %s: %s", name, oneLine(err))
			continue
		}
		w.r.Printf("topicdel %s", name)
	}
}
