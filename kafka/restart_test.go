package kafka

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/internal/testutil"
	"github.com/idemlog/idemlog/partition"
	"github.com/twmb/franz-go/pkg/kgo"
)

var restartKills = flag.Int("restart.kills", 4, "SIGKILLs of the server during TestRestartUnderLoad")

// restartAlways runs TestRestartUnderLoad's server under SyncAlways with
// durable-only visibility, as `idemlog serve --fsync always` does (its
// segments are then zero-filled ahead while syncs are small).
var restartAlways = flag.Bool("restart.always", false, "TestRestartUnderLoad's server syncs every append")

// TestServeChild is the child side of TestRestartUnderLoad: it serves the
// directory and address it is given until it is killed.
func TestServeChild(t *testing.T) {
	dir, addr := os.Getenv("IDEMLOG_CHILD_DIR"), os.Getenv("IDEMLOG_CHILD_ADDR")
	if dir == "" {
		t.Skip("child process of TestRestartUnderLoad")
	}
	opts := partition.Options{}
	if os.Getenv("IDEMLOG_CHILD_ALWAYS") != "" {
		opts.Sync.Kind, opts.DurableVisibility = partition.SyncAlways, true
	}
	e, err := engine.Open(dir, engine.Options{Partition: opts})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(e, Options{Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	if err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	for i := 0; ; i++ {
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		if i == 100 {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Println("ready")
	srv.Serve(ln)
}

// TestRestartUnderLoad: a transactional consume-transform-produce pipeline
// (kgo's GroupTransactSession) runs while the server process is killed
// with SIGKILL and restarted on the same data directory, several times.
// The committed output holds every input record exactly once: no
// duplicate (idempotence and transactions survive the crash) and no gap
// (nothing acknowledged was lost).
func TestRestartUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("kills processes")
	}
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	start := func() *testutil.Child {
		env := []string{"IDEMLOG_CHILD_DIR=" + dir, "IDEMLOG_CHILD_ADDR=" + addr}
		if *restartAlways {
			env = append(env, "IDEMLOG_CHILD_ALWAYS=1")
		}
		c := testutil.StartChild(t, "TestServeChild", env...)
		for l := range c.Lines {
			if l == "ready" {
				return c
			}
		}
		c.Abort()
		t.Fatal("child exited before serving")
		return nil
	}
	// child is replaced by the killer goroutine; the test reads it only
	// after that goroutine is done (<-killed), or at cleanup via killed.
	child := start()
	killed := make(chan struct{})
	killing := false
	defer func() {
		if killing {
			<-killed
		}
		child.Abort()
	}()

	ts := &testServer{addr: addr}
	admin := ts.client(t)
	for _, topic := range []string{"in", "out"} {
		if err := createTopic(t, admin, topic, 3); err != nil {
			t.Fatal(err)
		}
	}
	const n = 3000
	// The server is down for a while at every kill: the clients retry
	// every request (dial errors included) for up to a minute.
	opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.RetryTimeout(time.Minute), kgo.RecordRetries(1 << 30),
		kgo.RequestRetries(1 << 30), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond })}
	prod := ts.client(t, append(opts, kgo.DefaultProduceTopic("in"))...)
	newSession := func() *kgo.GroupTransactSession {
		sess, err := kgo.NewGroupTransactSession(append(opts, kgo.TransactionalID("etl"),
			kgo.ConsumerGroup("g"), kgo.ConsumeTopics("in"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DefaultProduceTopic("out"),
			// A replaced instance's transaction may hold pending offsets
			// (its TxnOffsetCommit landed, the answer was lost in a kill);
			// the new instance's OffsetFetch (require-stable) waits until
			// that transaction ends, which, as in Kafka, is when it times
			// out: keep the timeout short.
			kgo.SessionTimeout(6*time.Second), kgo.TransactionTimeout(3*time.Second))...)
		if err != nil {
			t.Fatal(err)
		}
		return sess
	}
	if os.Getenv("KGO_LOG") != "" {
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelInfo, nil)))
	}
	sess := newSession()
	defer func() { sess.Close() }()

	ctx := ctxT(t)
	produced := make(chan error, 1)
	var allProduced atomic.Bool
	go func() {
		for i := range n {
			if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
				produced <- fmt.Errorf("produce %d: %w", i, err)
				return
			}
		}
		allProduced.Store(true)
		produced <- nil
	}()
	killing = true
	go func() {
		defer close(killed)
		for range *restartKills {
			time.Sleep(time.Duration(300+rand.IntN(700)) * time.Millisecond)
			child.Kill()
			child.Wait()
			child = start()
			t.Logf("server killed and restarted")
		}
	}()
	done := map[string]bool{}
	restarts := 0
	for len(done) < n && ctx.Err() == nil {
		pollCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fs := sess.PollFetches(pollCtx)
		cancel()
		if fs.NumRecords() == 0 && pollCtx.Err() != nil {
			// Nothing left to consume. done counts the inputs of the
			// transactions whose End said committed; one whose End
			// failed after the server had committed it (the answer
			// lost in a kill) is committed but not counted, and its
			// inputs are never consumed again. The output topic says
			// what was committed: the checks below verify it exactly.
			if allProduced.Load() && committedOutputs(t, ts) >= n {
				break
			}
			continue
		}
		if err := sess.Begin(); err != nil {
			// Fenced: a transaction that outlived its timeout (the
			// server was down) was aborted with an epoch bump.
			t.Logf("begin: %v; starting a new instance", err)
			sess.Close()
			sess = newSession()
			restarts++
			continue
		}
		fs.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, &kgo.Record{Value: append([]byte("out-"), r.Value...)}, nil)
		})
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			// With the only broker gone for a while, an end may fail for
			// good (kgo does not retry a TxnOffsetCommit that cannot
			// dial). What an application does then: a new instance of
			// the same transactional id, which fences this one and
			// aborts its transaction; its records are consumed again
			// from the committed offsets.
			t.Logf("end: %v; starting a new instance", err)
			sess.Close()
			sess = newSession()
			restarts++
			continue
		}
		if committed {
			fs.EachRecord(func(r *kgo.Record) { done[string(r.Value)] = true })
		}
	}
	<-killed
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatalf("pipeline committed %d of %d inputs: %v", len(done), n, ctx.Err())
	}
	t.Logf("%d server kills, %d pipeline instances replaced, %d inputs of transactions in doubt", *restartKills, restarts, n-len(done))
	for _, check := range []struct{ topic, prefix string }{{"in", ""}, {"out", "out-"}} {
		got := consume(t, ts, check.topic, n, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
		seen := map[string]int{}
		for _, r := range got {
			seen[string(r.Value)]++
		}
		for i := range n {
			if c := seen[check.prefix+strconv.Itoa(i)]; c != 1 {
				t.Errorf("%s: %s%d appears %d times", check.topic, check.prefix, i, c)
			}
		}
		if len(got) != n {
			t.Errorf("%s: %d records, want %d", check.topic, len(got), n)
		}
	}
}

// committedOutputs counts the distinct records of topic "out" that a
// read_committed consumer sees within a second or two.
func committedOutputs(t *testing.T, ts *testServer) int {
	cl := ts.client(t, kgo.ConsumeTopics("out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	defer cl.Close()
	seen := map[string]bool{}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		if fs.NumRecords() == 0 {
			return len(seen)
		}
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}
}
