package powercut

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/kafka"
	"github.com/idemlog/idemlog/partition"
	"github.com/idemlog/idemlog/powercut/internal/child"
	"github.com/idemlog/idemlog/powercut/lazyfs"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

var flagListenerCuts = flag.Int("powercut.listener-cuts", 3, "power cuts of the server in TestPowerCutListener, per transaction version")

const envAddr = "POWERCUT_ADDR"

// TestPowerCutServeChild is the child side of TestPowerCutListener: idemlog
// serve (the kafka package's server) on the data dir it is given, until
// it is killed.
func TestPowerCutServeChild(t *testing.T) {
	cfg, ok, err := ConfigFromEnv()
	if !ok || os.Getenv(envAddr) == "" {
		t.Skip("child process of TestPowerCutListener")
	}
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.Open(cfg.Dir, cfg.EngineOptions())
	if err != nil {
		fmt.Printf("openfail %s\n", oneLine(err))
		t.Fatal(err)
	}
	srv, err := kafka.New(e, kafka.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	for i := 0; ; i++ {
		if ln, err = net.Listen("tcp", os.Getenv(envAddr)); err == nil {
			break
		}
		if i == 100 {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Println("ready")
	_ = srv.Serve(ln)
}

// TestPowerCutListener: `idemlog serve` under fsync always (durable-only
// visibility, as `--fsync always` runs it) on the lazy filesystem, with a
// franz-go transactional consume-process-produce pipeline (kgo's
// group transactions) from "in" to "out" while an idempotent producer
// fills "in". The server loses power several times: SIGKILL, cut,
// restart. At the end every acknowledged input is in "in" once and every
// input's output is in "out" once, read_committed. Both transaction
// versions: franz-go's default (version 2, EndTxn v5) and, with requests
// capped at Kafka 3.9's versions, version 1.
func TestPowerCutListener(t *testing.T) {
	if testing.Short() {
		t.Skip("power-cut listener test skipped in -short mode")
	}
	for _, tv := range []struct {
		name string
		opts []kgo.Opt
	}{
		{"tv2", nil},
		{"tv1", []kgo.Opt{kgo.MaxVersions(kversion.V3_9_0())}},
	} {
		t.Run(tv.name, func(t *testing.T) { runListener(t, tv.opts) })
	}
}

func runListener(t *testing.T, versionOpts []kgo.Opt) {
	seed := *flagSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	disk := lazyfs.NewDisk()
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := disk.Mount(mnt)
	if errors.Is(err, lazyfs.ErrUnavailable) {
		fmt.Fprintf(os.Stderr, "WARNING: power-cut listener test skipped: %v\n", err)
		t.Skipf("WARNING: FUSE unavailable, power-cut listener test not run: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = m.Unmount() }()
	cfg := Config{Dir: filepath.Join(mnt, "data"), Policy: partition.SyncPolicy{Kind: partition.SyncAlways},
		Mode: Modes[rng.IntN(len(Modes))], DurableVisibility: true, Seed: seed, Stage: 1}
	// The operator made the data dir durable; engine.Open's own creation
	// of it is TestPowerCut's concern.
	if err := os.Mkdir(cfg.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syncDir(mnt); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	start := func() (*child.Child, error) {
		c := child.Start(t, "TestPowerCutServeChild", append(cfg.Env(), envAddr+"="+addr)...)
		for l := range c.Lines {
			if l == "ready" {
				return c, nil
			}
			t.Logf("server: %s", l)
		}
		_, err := c.Wait()
		return nil, fmt.Errorf("server exited before serving: %v", err)
	}
	server, err := start()
	if err != nil {
		t.Fatal(err)
	}
	killed := make(chan struct{})
	defer func() {
		<-killed
		if server != nil {
			server.Abort()
		}
	}()

	opts := append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RetryTimeout(time.Minute), kgo.RecordRetries(1 << 30),
		kgo.RequestRetries(1 << 30), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond })},
		versionOpts...)
	admin, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	for _, topic := range []string{"in", "out"} {
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 3, 1
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(context.Background(), admin)
		if err == nil {
			err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	const n = 1500
	prod, err := kgo.NewClient(append(opts, kgo.DefaultProduceTopic("in"))...)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	newPipeline := func() *kgo.GroupTransactSession {
		pipe, err := kgo.NewGroupTransactSession(append(opts, kgo.TransactionalID("etl"),
			kgo.ConsumerGroup("g"), kgo.ConsumeTopics("in"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DefaultProduceTopic("out"),
			kgo.SessionTimeout(6*time.Second), kgo.TransactionTimeout(3*time.Second))...)
		if err != nil {
			t.Fatal(err)
		}
		return pipe
	}
	pipe := newPipeline()
	defer func() { pipe.Close() }()

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	produced := make(chan error, 1)
	go func() {
		for i := range n {
			if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
				produced <- fmt.Errorf("produce %d: %w", i, err)
				return
			}
		}
		produced <- nil
	}()
	go func() {
		defer close(killed)
		for range *flagListenerCuts {
			time.Sleep(time.Duration(500+rng.IntN(1500)) * time.Millisecond)
			server.Kill()
			_, _ = server.Wait()
			if err := m.Unmount(); err != nil {
				t.Error(err)
				return
			}
			torn := lazyfs.Torn{}
			if rng.Float64() < *flagTorn {
				torn.Rand = rand.New(rand.NewPCG(rng.Uint64(), 1))
			}
			disk.Cut(torn)
			if m, err = disk.Mount(mnt); err != nil {
				t.Error(err)
				return
			}
			if server, err = start(); err != nil {
				t.Errorf("after a power cut: %v", err)
				return
			}
			t.Logf("server lost power (torn %v) and restarted", torn.Rand != nil)
		}
	}()
	allProduced := false
	lastProgress := time.Now()
	cutting := killed
	for ctx.Err() == nil {
		select {
		case <-cutting:
			if server == nil {
				return // the restart failed, reported above
			}
			cutting = nil // all cuts done
		default:
		}
		select {
		case err := <-produced:
			if err != nil {
				t.Fatal(err)
			}
			allProduced = true
		default:
		}
		pollCtx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		fs := pipe.PollFetches(pollCtx)
		pcancel()
		if fs.NumRecords() == 0 && pollCtx.Err() != nil {
			if allProduced && countCommitted(opts, "out") >= n {
				break
			}
			if time.Since(lastProgress) > time.Minute {
				t.Fatalf("pipeline made no progress for a minute: a wedged transactional id or a pinned partition")
			}
			continue
		}
		if err := pipe.Begin(); err != nil {
			t.Logf("begin: %v; starting a new instance", err)
			pipe.Close()
			pipe = newPipeline()
			continue
		}
		fs.EachRecord(func(r *kgo.Record) {
			pipe.Produce(ctx, &kgo.Record{Value: append([]byte("out-"), r.Value...)}, nil)
		})
		if committed, err := pipe.End(ctx, kgo.TryCommit); err != nil {
			t.Logf("end: %v; starting a new instance", err)
			pipe.Close()
			pipe = newPipeline()
			continue
		} else if committed {
			lastProgress = time.Now()
		}
	}
	<-killed
	if server == nil {
		return
	}
	if ctx.Err() != nil {
		t.Fatalf("pipeline did not finish: %v", ctx.Err())
	}
	for _, check := range []struct{ topic, prefix string }{{"in", ""}, {"out", "out-"}} {
		seen := committedValues(opts, check.topic)
		for i := range n {
			if c := seen[check.prefix+strconv.Itoa(i)]; c != 1 {
				t.Errorf("%s: %s%d appears %d times", check.topic, check.prefix, i, c)
			}
		}
		if len(seen) != n {
			t.Errorf("%s: %d distinct records, want %d", check.topic, len(seen), n)
		}
	}
}

// committedValues counts each value of topic a read_committed consumer
// sees from the start, reading until a poll comes back empty.
func committedValues(opts []kgo.Opt, topic string) map[string]int {
	cl, err := kgo.NewClient(append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))...)
	if err != nil {
		return nil
	}
	defer cl.Close()
	seen := map[string]int{}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		if fs.NumRecords() == 0 {
			return seen
		}
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
	}
}

func countCommitted(opts []kgo.Opt, topic string) int { return len(committedValues(opts, topic)) }
