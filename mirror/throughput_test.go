package mirror

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkMirrorThroughput compares, side by side, the mirror copying
// 1 KiB records from an idemlog data dir to an idemlog server over
// loopback TCP with the destination's own idempotent produce throughput,
// with the same client options (producerOpts), into the same server.
// The records of each mirror iteration are written to a fresh source dir
// before its timer starts. cpu-ns/op is the process's CPU time (client,
// server and mirror all run here) per record.
//
//	go test -run '^$' -bench MirrorThroughput -benchtime 100000x ./mirror
func BenchmarkMirrorThroughput(b *testing.B) {
	const parts = 4
	value := make([]byte, 1024)
	rng := rand.New(rand.NewPCG(1, 1))
	for i := range value {
		value[i] = byte(rng.Uint32())
	}
	e, err := engine.Open(b.TempDir(), engine.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	srv, err := kafka.New(e, kafka.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(ln)
	dst := ln.Addr().String()
	ctx := context.Background()
	produce := func(b *testing.B, topic string, n int, opts ...kgo.Opt) {
		cl, err := kgo.NewClient(append(append(opts, producerOpts()...), kgo.DefaultProduceTopic(topic))...)
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		for i := range n {
			cl.Produce(ctx, &kgo.Record{Value: value, Partition: int32(i % parts)}, func(_ *kgo.Record, err error) {
				if err != nil {
					b.Error(err)
				}
			})
		}
		if err := cl.Flush(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("produce", func(b *testing.B) {
		topic := fmt.Sprintf("produce-%d", b.N)
		if err := e.CreateTopic(topic, parts); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(value)))
		cpu := processCPU()
		b.ResetTimer()
		produce(b, topic, b.N, kgo.SeedBrokers(dst))
		b.StopTimer()
		b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
	})
	b.Run("mirror", func(b *testing.B) {
		src := b.TempDir()
		topic := fmt.Sprintf("mirror-%d", b.N)
		se, err := engine.Open(src, engine.Options{})
		if err != nil {
			b.Fatal(err)
		}
		ssrv, err := kafka.New(se, kafka.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if err := se.CreateTopic(topic, parts); err != nil {
			b.Fatal(err)
		}
		produce(b, topic, b.N, kgo.SeedBrokers("src"), kgo.Dialer(ssrv.Dial))
		ssrv.Close()
		se.Close()
		b.SetBytes(int64(len(value)))
		cpu := processCPU()
		b.ResetTimer()
		err = Run(ctx, Options{From: Endpoint{Dir: src}, To: Endpoint{Brokers: []string{dst}},
			Name: topic, StopAtEnd: true, ProgressInterval: time.Hour})
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
	})
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
