package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
	"time"
)

// TestMain lets the test binary serve as a child broker too.
func TestMain(m *testing.M) {
	maybeBroker()
	os.Exit(m.Run())
}

// The smoke tests run every target and peer on a few thousand records:
// they check that the comparisons work end to end (records produced are
// consumed, exactly), not how fast.

func TestKafkaSmoke(t *testing.T) {
	c := KafkaConfig{Records: 3000, RecordSize: 1024, Partitions: []int{1, 4}, Rounds: 1,
		Targets: []string{"kfake", "idemlog", "idemlog-always", "idemlog-pwrite"}, TxnEvery: 1000,
		Compression: "default", Dir: t.TempDir()}
	rep, err := runKafka(context.Background(), c, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want := 4 * 2 * 2; len(rep.Runs) != want {
		t.Fatalf("%d runs, want %d", len(rep.Runs), want)
	}
	for _, r := range rep.Runs {
		if r.Produce.Records != 3000 || r.Consume.Records != 3000 {
			t.Errorf("%s %s p=%d: produced %d, consumed %d", r.Target, r.Mode, r.Partitions, r.Produce.Records, r.Consume.Records)
		}
	}
	for _, s := range rep.Summary {
		if s.Target != "kfake" && (len(s.Ratios) != 1 || s.Ratios[0].Median <= 0) {
			t.Errorf("%s %s: ratios %+v", s.Workload, s.Target, s.Ratios)
		}
	}
	if err := printSummaries(io.Discard, rep.Summary); err != nil {
		t.Fatal(err)
	}
}

func TestKafkaBrokerProcess(t *testing.T) {
	c := KafkaConfig{Records: 2000, RecordSize: 1024, Partitions: []int{2}, Rounds: 1,
		Targets: []string{"kfake", "idemlog"}, Compression: "default", Dir: t.TempDir(), BrokerProcess: true}
	rep, err := runKafka(context.Background(), c, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Runs {
		if r.Consume.Records != 2000 || r.Produce.BrokerCPUUsPerRecord <= 0 {
			t.Errorf("%s: consumed %d, broker cpu %.2f us/record", r.Target, r.Consume.Records, r.Produce.BrokerCPUUsPerRecord)
		}
	}
}

func TestStorageSmoke(t *testing.T) {
	c := StorageConfig{Records: 2000, Sizes: []int{100}, PerBatch: 100, Durabilities: []string{"none", "batch", "group"}, Writers: 4,
		MaxTime: 10 * time.Second, Rounds: 1, Dir: t.TempDir()}
	for _, p := range storagePeers {
		c.Peers = append(c.Peers, p.name)
	}
	rep, err := runStorage(context.Background(), c, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want := 3 * len(storagePeers); len(rep.Runs) != want {
		t.Fatalf("%d runs, want %d", len(rep.Runs), want)
	}
	group := 0
	for _, r := range rep.Runs {
		if r.Phase.Records != 2000 || r.Truncated || r.Phase.BatchLatencyUs.N != 20 {
			t.Errorf("%s %v: %d records in %d batches, truncated %v", r.Peer, r.Workload, r.Phase.Records,
				r.Phase.BatchLatencyUs.N, r.Truncated)
		}
		if r.Workload.Writers == 4 && r.Workload.Sync {
			group++
		}
	}
	if group != len(storagePeers) {
		t.Errorf("%d group-commit runs, want %d", group, len(storagePeers))
	}
}

// TestRawGroupCommit checks raw's group commit, the bound the group
// durability is measured against: concurrent writers' batches all land,
// each whole, none twice.
func TestRawGroupCommit(t *testing.T) {
	const lanes, batches, perBatch, size = 8, 50, 10, 16
	w := workload{Size: size, PerBatch: perBatch, Sync: true, Writers: lanes, Records: lanes * batches * perBatch}
	sw, err := openRaw(t.TempDir(), w)
	if err != nil {
		t.Fatal(err)
	}
	defer sw.close()
	r := sw.(*rawWriter)
	var wg sync.WaitGroup
	for i := range lanes {
		l, err := r.lane(i)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			recs := make([][]byte, perBatch)
			for b := range batches {
				for k := range recs {
					recs[k] = bytes.Repeat([]byte{byte(i), byte(b), byte(k)}, size/3+1)[:size]
				}
				if err := l.write(recs); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if want := int64(w.Records * size); r.off != want {
		t.Fatalf("wrote %d bytes, want %d", r.off, want)
	}
	data := make([]byte, r.off)
	if _, err := r.f.ReadAt(data, 0); err != nil {
		t.Fatal(err)
	}
	seen := map[[2]byte]bool{}
	for off := 0; off < len(data); off += perBatch * size {
		b := data[off : off+perBatch*size]
		key := [2]byte{b[0], b[1]}
		if seen[key] {
			t.Fatalf("batch %v twice", key)
		}
		seen[key] = true
		for k := range perBatch {
			want := bytes.Repeat([]byte{key[0], key[1], byte(k)}, size/3+1)[:size]
			if !bytes.Equal(b[k*size:(k+1)*size], want) {
				t.Fatalf("batch %v record %d torn: %x", key, k, b[k*size:(k+1)*size])
			}
		}
	}
	if len(seen) != lanes*batches {
		t.Fatalf("%d batches, want %d", len(seen), lanes*batches)
	}
}

// BenchmarkKafka produces b.N records of 1 KiB through kgo to each target
// (a fresh broker per call), then consumes them read_committed; one op is
// one record. `go test -bench Kafka -benchtime 200000x`.
func BenchmarkKafka(b *testing.B) {
	for _, target := range []string{"kfake", "idemlog"} {
		for _, parts := range []int{1, 4} {
			b.Run(fmt.Sprintf("target=%s/partitions=%d", target, parts), func(b *testing.B) {
				c := KafkaConfig{Records: b.N, RecordSize: 1024, Compression: "default", Dir: b.TempDir()}
				ts, err := kafkaTargets([]string{target}, c.Dir)
				if err != nil {
					b.Fatal(err)
				}
				br, err := ts[0].start(kafkaTopic, parts)
				if err != nil {
					b.Fatal(err)
				}
				defer br.close()
				ctx := context.Background()
				b.ResetTimer()
				prod, err := produce(ctx, br.addr(), kafkaTopic, &c, 0)
				if err != nil {
					b.Fatal(err)
				}
				cons, err := consume(ctx, br.addr(), kafkaTopic, parts, prod.Records, &c)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				// ns/op would count the broker's start; the rates do not.
				b.ReportMetric(0, "ns/op")
				b.ReportMetric(prod.RecordsPerSec, "produce-rec/s")
				b.ReportMetric(cons.RecordsPerSec, "consume-rec/s")
				b.ReportMetric(prod.CPUUsPerRecord*1000, "produce-cpu-ns/rec")
				b.ReportMetric(cons.CPUUsPerRecord*1000, "consume-cpu-ns/rec")
			})
		}
	}
}

// BenchmarkStorage writes b.N batches of 100 records with each peer (a
// fresh directory per call), group commit with 16 writers; one op is one
// batch.
// `go test -bench Storage -benchtime 1000x`.
func BenchmarkStorage(b *testing.B) {
	for _, dur := range []string{"none", "batch", "group"} {
		for _, size := range []int{100, 1024} {
			for _, p := range storagePeers {
				b.Run(fmt.Sprintf("durability=%s/size=%d/peer=%s", dur, size, p.name), func(b *testing.B) {
					c := StorageConfig{Records: b.N * 100, PerBatch: 100, MaxTime: time.Hour, Dir: b.TempDir()}
					w := workload{Size: size, PerBatch: 100, Sync: dur != "none", Writers: 1, Records: c.Records}
					if dur == "group" {
						w.Writers = 16
					}
					b.ResetTimer()
					run, err := storageOnce(c, p, w, 0)
					if err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					b.ReportMetric(0, "ns/op") // it would count the peer's start
					b.ReportMetric(run.Phase.RecordsPerSec, "rec/s")
					b.ReportMetric(run.Phase.CPUUsPerRecord*1000, "cpu-ns/rec")
				})
			}
		}
	}
}
