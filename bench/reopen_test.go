//go:build linux

package bench

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/internal/enginekill"
)

// reopenValues returns every record value of partition 0 of the bench topic.
func reopenValues(t *testing.T, dir string) [][]byte {
	t.Helper()
	e, err := engine.Open(dir, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	p, err := e.Partition("bench", 0)
	if err != nil {
		t.Fatal(err)
	}
	var dec batch.Decoder
	var out [][]byte
	for off := int64(0); off < p.HighWatermark(); {
		ch, err := p.Read(off, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		for data := ch.Data; len(data) > 0; {
			sz, _ := batch.Size(data)
			b := batch.Batch(data[:sz])
			data = data[sz:]
			if b.IsControl() {
				continue
			}
			recs, err := dec.Records(b)
			if err != nil {
				t.Fatal(err)
			}
			var r batch.Record
			for recs.Next(&r) {
				out = append(out, bytes.Clone(r.Value))
			}
		}
		off = ch.NextOffset
		ch.Release()
	}
	return out
}

// TestSeedReproducible: the same --seed gives the same payloads, a
// different one different payloads.
func TestSeedReproducible(t *testing.T) {
	for _, payload := range []string{"text", "random"} {
		run := func(seed int64) [][]byte {
			c := small(t)
			c.Producers, c.Partitions, c.Records, c.Payload, c.Seed = 1, 1, 500, payload, seed
			mustRun(t, c)
			return reopenValues(t, c.Dir)
		}
		a, b, d := run(7), run(7), run(8)
		if len(a) != 500 || len(b) != 500 {
			t.Fatalf("%s: %d, %d values", payload, len(a), len(b))
		}
		for i := range a {
			if !bytes.Equal(a[i], b[i]) {
				t.Fatalf("%s: seed 7 twice: value %d differs", payload, i)
			}
		}
		same := 0
		for i := range a {
			if bytes.Equal(a[i], d[i]) {
				same++
			}
		}
		if same == len(a) {
			t.Errorf("%s: seeds 7 and 8 give the same payloads", payload)
		}
	}
}

// TestAllocsIndependentOfReaders: allocs_per_batch is the producers'
// allocations per batch; readers running beside them must not change it.
func TestAllocsIndependentOfReaders(t *testing.T) {
	c := small(t)
	c.Producers, c.Partitions, c.Records, c.Batch = 2, 2, 40000, 10
	c.Mode = "plain"
	r0 := mustRun(t, c)
	c = small(t)
	c.Producers, c.Partitions, c.Records, c.Batch = 2, 2, 40000, 10
	c.Mode = "plain"
	c.Readers = 8
	r8 := mustRun(t, c)
	t.Logf("allocs/batch: 0 readers %.2f, 8 readers %.2f", r0.AllocsPerBatch, r8.AllocsPerBatch)
	if r8.AllocsPerBatch > 2*r0.AllocsPerBatch+1 {
		t.Errorf("allocs_per_batch %.2f with 8 readers, %.2f without", r8.AllocsPerBatch, r0.AllocsPerBatch)
	}
}

// TestReopenFewerPartitions: reopening a dir whose topic has 4
// partitions with --partitions 2 must not silently write to half the topic.
func TestReopenFewerPartitions(t *testing.T) {
	c := small(t)
	c.Partitions, c.Producers = 4, 4
	mustRun(t, c)
	c.Partitions, c.Producers = 2, 2
	res, err := Run(context.Background(), c, nil)
	if err == nil {
		t.Errorf("reopened a 4-partition topic with --partitions 2: no error (reopened %v, %d partition offsets reported)", res.Reopened, len(res.PartitionOffsets))
	}
}

// TestReopenAfterCrashedBenchTxn: a dir left with an open transaction
// (crash mid-transaction of producer bench-0) is reopened and appended to;
// read_committed readers must see every committed record: the earlier
// run's and this run's.
func TestReopenAfterCrashedBenchTxn(t *testing.T) {
	c := small(t)
	c.Mode, c.Producers, c.Partitions, c.Records = "transactional", 1, 1, 1000
	first := mustRun(t, c)

	crashMidTxn(t, c.Dir, "bench-0")

	c.Records, c.Readers, c.Isolation = 1000, 1, "read_committed"
	start := time.Now()
	second, err := Run(context.Background(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("took %v; read %d, wrote %d + %d", time.Since(start), second.ReadRecords, first.Records, second.Records)
	if second.ReadRecords != first.Records+second.Records {
		t.Errorf("read_committed readers read %d records; committed: %d + %d", second.ReadRecords, first.Records, second.Records)
	}
}

// TestReopenCrashedTxnOtherMode: a transactional run crashed
// mid-transaction (producer bench-0); the dir is reopened with --mode
// idempotent and read_committed readers. The run's own records are written
// and acknowledged, yet the readers report being done having read none of
// them (the last stable offset is held by the earlier run's open
// transaction), and the run reports success.
func TestReopenCrashedTxnOtherMode(t *testing.T) {
	c := small(t)
	c.Mode, c.Producers, c.Partitions, c.Records = "transactional", 1, 1, 1000
	first := mustRun(t, c)

	e, err := engine.Open(c.Dir, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := e.Partition("bench", 0)
	tp, err := e.NewTransactionalProducer("bench-0", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	bld := batch.NewBuilder(batch.CodecNone)
	bld.Append(1, nil, []byte("x"), nil)
	if _, err := tp.Send(p, bld); err != nil {
		t.Fatal(err)
	}
	enginekill.Kill(e)

	c.Mode, c.Records, c.Readers, c.Isolation = "idempotent", 1000, 1, "read_committed"
	// The run fences the crashed run's transactional id (fenceLeftoverTxns),
	// so its readers get past the leftover transaction and read everything.
	second, err := Run(context.Background(), c, nil)
	if err != nil {
		t.Fatalf("reopened run: %v", err)
	}
	if second.ReadRecords != first.Records+second.Records {
		t.Errorf("run succeeded, read_committed readers read %d records; committed: %d + %d", second.ReadRecords, first.Records, second.Records)
	}
}

// TestCrashedBigTxn: as TestReopenAfterCrashedBenchTxn, with an
// aborted transaction larger than a reader's 1 MiB read.
func TestCrashedBigTxn(t *testing.T) {
	c := small(t)
	c.Mode, c.Producers, c.Partitions, c.Records = "transactional", 1, 1, 1000
	first := mustRun(t, c)
	e, err := engine.Open(c.Dir, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := e.Partition("bench", 0)
	tp, err := e.NewTransactionalProducer("bench-0", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	val := make([]byte, 1000)
	for range 40 {
		bld := batch.NewBuilder(batch.CodecNone)
		for range 100 {
			bld.Append(1, nil, val, nil)
		}
		if _, err := tp.Send(p, bld); err != nil {
			t.Fatal(err)
		}
	}
	enginekill.Kill(e)
	c.Records, c.Readers, c.Isolation = 1000, 1, "read_committed"
	second := mustRun(t, c)
	if second.ReadRecords != first.Records+second.Records {
		t.Errorf("read_committed readers read %d records; committed: %d + %d", second.ReadRecords, first.Records, second.Records)
	}
}

// TestBatchOverflow: --batch times --record-size is checked against
// MaxBatchBytes in int64, which a huge --batch overflows: 2^61 records of
// 0 bytes pass Validate, and a duration run then builds one batch forever.
func TestBatchOverflow(t *testing.T) {
	c := Defaults()
	c.Batch, c.RecordSize = 1<<61, 0
	if err := c.Validate(); err == nil {
		t.Errorf("--batch %d --record-size 0 passes Validate", c.Batch)
	}
	c.Batch, c.RecordSize = 1<<60, 8 // 2^60 * 16 = 2^64
	if err := c.Validate(); err == nil {
		t.Errorf("--batch %d --record-size 8 passes Validate", c.Batch)
	}
}

// TestSyncsObservedNever: syncs_observed is documented as 0 unless
// fsync is always or bytes=N; under never it counts segment rolls' syncs,
// and the summary then prints "batches per sync" for a run that never syncs.
func TestSyncsObservedNever(t *testing.T) {
	c := small(t)
	c.Records, c.RecordSize, c.SegmentBytes, c.Producers, c.Partitions = 3000000, 100, 64<<20, 1, 1
	res := mustRun(t, c)
	if res.SyncsObserved != 0 {
		var b bytes.Buffer
		res.WriteSummary(&b)
		t.Errorf("fsync never: syncs_observed %d\n%s", res.SyncsObserved, b.String())
	}
}

// crashMidTxn reopens the bench's data dir, opens a transaction of
// transactional id id on partition 0 of the bench's topic with one
// record, and kills the engine: a crash mid-transaction.
func crashMidTxn(t *testing.T, dir, id string) {
	t.Helper()
	e, err := engine.Open(dir, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.Partition("bench", 0)
	if err != nil {
		t.Fatal(err)
	}
	tp, err := e.NewTransactionalProducer(id, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	bld := batch.NewBuilder(batch.CodecNone)
	bld.Append(1, nil, []byte("x"), nil)
	if _, err := tp.Send(p, bld); err != nil {
		t.Fatal(err)
	}
	enginekill.Kill(e)
}
