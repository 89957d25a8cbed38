package interop

import (
	"context"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/kafka"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkCreateTopicsThroughListener times one franz-go CreateTopics of
// a topic of N partitions against `idemlog serve` on a fresh data dir, as
// a Kafka Streams application or a topic-per-tenant service asks for
// them. Run it with -benchtime=1x. create-cpu-s is the process's CPU
// time (user and system, client and listener together) over the request:
// on a shared machine, the work done as against the wait for a core.
func BenchmarkCreateTopicsThroughListener(b *testing.B) {
	for _, n := range []int32{1000, 10000} {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			var took, cpu time.Duration
			for i := range b.N {
				e, err := engine.Open(b.TempDir(), engine.Options{})
				if err != nil {
					b.Fatal(err)
				}
				srv, err := kafka.New(e, kafka.Options{})
				if err != nil {
					b.Fatal(err)
				}
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					b.Fatal(err)
				}
				go srv.Serve(ln)
				cl, err := kgo.NewClient(kgo.SeedBrokers(ln.Addr().String()), kgo.RequestTimeoutOverhead(5*time.Minute))
				if err != nil {
					b.Fatal(err)
				}
				adm := kadm.NewClient(cl)
				adm.SetTimeoutMillis(int32((5 * time.Minute).Milliseconds()))
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				t0, c0 := time.Now(), processCPU()
				resp, err := adm.CreateTopics(ctx, n, 1, nil, fmt.Sprintf("t%d", i))
				took += time.Since(t0)
				cpu += processCPU() - c0
				cancel()
				if err == nil {
					err = resp.Error()
				}
				if err != nil {
					b.Fatal(err)
				}
				cl.Close()
				srv.Close()
				if err := e.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(took.Seconds()/float64(b.N), "create-s")
			b.ReportMetric(cpu.Seconds()/float64(b.N), "create-cpu-s")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// processCPU is the CPU time (user and system) the process used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
