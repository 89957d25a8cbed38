package main

import (
	"context"
	"fmt"
	"io"
	"os"
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
	c := StorageConfig{Records: 2000, Sizes: []int{100}, PerBatch: 100, Syncs: []bool{false, true},
		MaxTime: 10 * time.Second, Rounds: 1, Dir: t.TempDir()}
	for _, p := range storagePeers {
		c.Peers = append(c.Peers, p.name)
	}
	rep, err := runStorage(context.Background(), c, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Runs {
		if r.Phase.Records != 2000 || r.Truncated {
			t.Errorf("%s %v: %d records, truncated %v", r.Peer, r.Workload, r.Phase.Records, r.Truncated)
		}
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
// fresh directory per call); one op is one batch.
// `go test -bench Storage -benchtime 1000x`.
func BenchmarkStorage(b *testing.B) {
	for _, sync := range []bool{false, true} {
		for _, size := range []int{100, 1024} {
			for _, p := range storagePeers {
				b.Run(fmt.Sprintf("sync=%v/size=%d/peer=%s", sync, size, p.name), func(b *testing.B) {
					c := StorageConfig{Records: b.N * 100, PerBatch: 100, MaxTime: time.Hour, Dir: b.TempDir()}
					w := workload{Size: size, PerBatch: 100, Sync: sync, Records: c.Records}
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
