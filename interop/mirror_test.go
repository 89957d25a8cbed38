package interop

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/internal/testutil/enginetest"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var (
	mirrorKillCycles = flag.Int("mirror-kill-cycles", 20, "SIGKILL cycles of each mirror crash test")
	mirrorSeed       = flag.Uint64("mirror-seed", 0, "seed of the mirror crash tests' kill timing (0: from the clock)")
)

// mirrorRand returns the kill timing's generator, logging its seed so that
// a failing run can be repeated with -mirror-seed.
func mirrorRand(t *testing.T) *rand.Rand {
	seed := *mirrorSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("-mirror-seed %d -mirror-kill-cycles %d", seed, *mirrorKillCycles)
	return rand.New(rand.NewPCG(seed, 0))
}

const (
	mirrorTopic = "events"
	mirrorParts = 3
)

// serveProc is an `idemlog serve` process on a fixed address, so that it
// can be killed and started again where its clients expect it.
type serveProc struct {
	t    *testing.T
	dir  string
	addr string
	cmd  *exec.Cmd
}

func startServe(t *testing.T, dir string) *serveProc {
	s := &serveProc{t: t, dir: dir, addr: "127.0.0.1:0"}
	s.start()
	t.Cleanup(s.kill)
	return s
}

func (s *serveProc) start() {
	s.t.Helper()
	cmd := exec.Command(idemlogCLI(s.t), "serve", "--dir", s.dir, "--listen", s.addr, "--auto-create=false", "--log-level", "error")
	out, err := cmd.StdoutPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	deadline := time.Now().Add(20 * time.Second)
	for {
		if err := cmd.Start(); err != nil {
			s.t.Fatal(err)
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		if err == nil {
			s.addr = strings.TrimSpace(strings.TrimPrefix(line, "listening on "))
			s.cmd = cmd
			return
		}
		// The port of the killed process may not be free yet.
		cmd.Wait()
		if time.Now().After(deadline) {
			s.t.Fatalf("idemlog serve --listen %s did not start", s.addr)
		}
		time.Sleep(50 * time.Millisecond)
		cmd = exec.Command(cmd.Path, cmd.Args[1:]...)
		if out, err = cmd.StdoutPipe(); err != nil {
			s.t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
	}
}

// kill sends SIGKILL: no clean shutdown, as in a crash.
func (s *serveProc) kill() {
	if s.cmd != nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
		s.cmd = nil
	}
}

// mirrorProc runs `idemlog mirror` as a process, to be killed.
type mirrorProc struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer
	done   chan error
}

func startMirror(t *testing.T, from, to string, extra ...string) *mirrorProc {
	t.Helper()
	m := &mirrorProc{done: make(chan error, 1)}
	m.cmd = exec.Command(idemlogCLI(t), append([]string{"mirror", "--from", from, "--to", to,
		"--commit-interval", "20ms", "--log-level", "error"}, extra...)...)
	m.cmd.Stderr = &m.stderr
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { m.done <- m.cmd.Wait() }()
	return m
}

func (m *mirrorProc) kill() {
	m.cmd.Process.Kill()
	<-m.done
}

// withEngineDir serves dir in-process for the duration of f.
func withEngineDir(t *testing.T, dir string, f func(e *engine.Engine, opts []kgo.Opt)) {
	t.Helper()
	enginetest.Serve(t, dir, func(e *engine.Engine, opts ...kgo.Opt) { f(e, opts) })
}

// sourceWriter writes transactions to every partition of mirrorTopic, one
// in three aborted; values say which ("...-abort"), so that an aborted
// record found anywhere in a destination is recognised.
type sourceWriter struct {
	seq     atomic.Int64
	aborted atomic.Int64
}

func (w *sourceWriter) writeTxn(ctx context.Context, cl *kgo.Client) error {
	n := w.seq.Add(1)
	commit := n%3 != 0
	if err := cl.BeginTransaction(); err != nil {
		return err
	}
	var rs []*kgo.Record
	for p := range int32(mirrorParts) {
		for j := range 2 {
			tag := "commit"
			if !commit {
				tag = "abort"
			}
			r := &kgo.Record{Topic: mirrorTopic, Partition: p,
				Key:       fmt.Appendf(nil, "k%d", n),
				Value:     fmt.Appendf(nil, "%d-%d-%d-%s", n, p, j, tag),
				Headers:   []kgo.RecordHeader{{Key: "n", Value: fmt.Appendf(nil, "%d", n)}, {Key: "empty", Value: []byte{}}},
				Timestamp: time.UnixMilli(1_600_000_000_000 + n*10 + int64(j))}
			if j == 1 {
				r.Key = nil
			}
			rs = append(rs, r)
		}
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		cl.AbortBufferedRecords(ctx)
		cl.EndTransaction(ctx, kgo.TryAbort)
		return err
	}
	if !commit {
		w.aborted.Add(1)
	}
	return cl.EndTransaction(ctx, kgo.TransactionEndTry(commit))
}

func newSourceProducer(opts []kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append(opts, kgo.TransactionalID("mirror-test-source"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RetryTimeout(5*time.Second))...)
}

// readCommitted reads every partition of mirrorTopic read_committed up to
// its last stable offset. Control records are kept while reading so that
// "caught up" is exact (position == last stable offset), and dropped from
// the result.
func readCommitted(t *testing.T, opts []kgo.Opt) map[int32][]*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	req := kmsg.NewPtrListOffsetsRequest()
	req.IsolationLevel = 1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = mirrorTopic
	for p := range int32(mirrorParts) {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = p, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	ends := map[int32]int64{}
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != 0 {
			t.Fatalf("ListOffsets %s/%d: error %d", mirrorTopic, p.Partition, p.ErrorCode)
		}
		ends[p.Partition] = p.Offset
	}
	cl, err := kgo.NewClient(append(opts, kgo.ConsumeTopics(mirrorTopic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	out := map[int32][]*kgo.Record{}
	pos := map[int32]int64{}
	caughtUp := func() bool {
		for p, end := range ends {
			if pos[p] < end {
				return false
			}
		}
		return true
	}
	for !caughtUp() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: positions %v, ends %v: %v", mirrorTopic, pos, ends, ctx.Err())
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			pos[r.Partition] = r.Offset + 1
			if !r.Attrs.IsControl() {
				out[r.Partition] = append(out[r.Partition], r)
			}
		})
	}
	return out
}

// compareMirrored checks the destination against the source, partition by
// partition: the same records (key, value, headers, timestamp) in the
// same order, so none lost and none twice, and none of an aborted
// transaction.
func compareMirrored(t *testing.T, src, dst map[int32][]*kgo.Record, minRecords int) {
	t.Helper()
	total := 0
	for p := range int32(mirrorParts) {
		s, d := src[p], dst[p]
		total += len(s)
		seen := map[string]bool{}
		for _, r := range d {
			if bytes.HasSuffix(r.Value, []byte("-abort")) {
				t.Fatalf("partition %d: aborted record %s copied", p, r.Value)
			}
			if seen[string(r.Value)] {
				t.Fatalf("partition %d: record %s copied twice", p, r.Value)
			}
			seen[string(r.Value)] = true
		}
		if len(s) != len(d) {
			t.Fatalf("partition %d: source has %d committed records, destination %d", p, len(s), len(d))
		}
		for i := range s {
			a, b := s[i], d[i]
			if !bytes.Equal(a.Value, b.Value) || !bytes.Equal(a.Key, b.Key) || (a.Key == nil) != (b.Key == nil) ||
				!a.Timestamp.Equal(b.Timestamp) || len(a.Headers) != len(b.Headers) {
				t.Fatalf("partition %d record %d: source %+v, destination %+v", p, i, a, b)
			}
			for h := range a.Headers {
				if a.Headers[h].Key != b.Headers[h].Key || !bytes.Equal(a.Headers[h].Value, b.Headers[h].Value) ||
					(a.Headers[h].Value == nil) != (b.Headers[h].Value == nil) {
					t.Fatalf("partition %d record %d: headers %v != %v", p, i, a.Headers, b.Headers)
				}
			}
		}
	}
	if total < minRecords {
		t.Fatalf("only %d committed records in the source; the test wrote too little to mean anything", total)
	}
}

// finishMirror runs the mirror to the end of the source (--stop-at-end)
// with nothing killed, and checks it exits 0.
func finishMirror(t *testing.T, from, to string) {
	t.Helper()
	m := startMirror(t, from, to, "--stop-at-end")
	select {
	case err := <-m.done:
		if err != nil {
			t.Fatalf("final mirror run: %v\n%s", err, m.stderr.String())
		}
	case <-time.After(60 * time.Second):
		m.cmd.Process.Kill()
		<-m.done
		t.Fatalf("final mirror run did not catch up in 60s\n%s", m.stderr.String())
	}
}

func createSourceTopic(t *testing.T, dir string) {
	t.Helper()
	e, err := engine.Open(dir, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.CreateTopic(mirrorTopic, mirrorParts); err != nil {
		t.Fatal(err)
	}
}

// TestMirrorDirToServeSurvivesKills mirrors an idemlog data dir (opened by
// the mirror process) to `idemlog serve`. Each cycle adds committed and
// aborted transactions to the source, starts the mirror, and SIGKILLs it
// at a random moment, in half the cycles after SIGKILLing the destination
// server under it (restarted at once). A final run to the end, and the
// destination must equal the source read_committed: the positions stored
// with each destination transaction are what lets a restarted mirror go
// on without a gap or a duplicate.
func TestMirrorDirToServeSurvivesKills(t *testing.T) {
	srcDir, dstDir := t.TempDir(), t.TempDir()
	createSourceTopic(t, srcDir)
	dst := startServe(t, dstDir)
	rng := mirrorRand(t)
	w := &sourceWriter{}
	serverKills := 0
	for cycle := range *mirrorKillCycles {
		withEngineDir(t, srcDir, func(_ *engine.Engine, opts []kgo.Opt) {
			cl, err := newSourceProducer(opts)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for range 5 + rng.IntN(20) {
				if err := w.writeTxn(ctx, cl); err != nil {
					t.Fatalf("cycle %d: source transaction: %v", cycle, err)
				}
			}
		})
		m := startMirror(t, srcDir, dst.addr)
		if rng.IntN(2) == 0 {
			time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
			dst.kill()
			serverKills++
			dst.start()
		}
		time.Sleep(time.Duration(50+rng.IntN(500)) * time.Millisecond)
		select {
		case err := <-m.done:
			t.Fatalf("cycle %d: mirror exited by itself: %v\n%s", cycle, err, m.stderr.String())
		default:
		}
		m.kill()
	}
	finishMirror(t, srcDir, dst.addr)
	var src map[int32][]*kgo.Record
	withEngineDir(t, srcDir, func(_ *engine.Engine, opts []kgo.Opt) { src = readCommitted(t, opts) })
	got := readCommitted(t, []kgo.Opt{kgo.SeedBrokers(dst.addr)})
	compareMirrored(t, src, got, *mirrorKillCycles*5*2*mirrorParts/2)
	if w.aborted.Load() == 0 || serverKills == 0 {
		t.Fatalf("aborted transactions %d, server kills %d: the cycles did not exercise both", w.aborted.Load(), serverKills)
	}
}

// TestMirrorServeToDirSurvivesKills mirrors `idemlog serve` to a data dir
// while a producer keeps writing committed and aborted transactions to
// the source. Each cycle SIGKILLs the mirror or the source server at a
// random moment (the server restarts at once, the mirror at the next
// cycle). Then the producer stops, a final run copies the rest, and the
// destination must equal the source read_committed.
func TestMirrorServeToDirSurvivesKills(t *testing.T) {
	srcDir, dstDir := t.TempDir(), t.TempDir()
	createSourceTopic(t, srcDir)
	src := startServe(t, srcDir)
	srcAddr := src.addr // fixed from here on: restarts reuse it
	rng := mirrorRand(t)
	w := &sourceWriter{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var cl *kgo.Client
		defer func() {
			if cl != nil {
				cl.Close()
			}
		}()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if cl == nil {
				var err error
				if cl, err = newSourceProducer([]kgo.Opt{kgo.SeedBrokers(srcAddr)}); err != nil {
					t.Error(err)
					return
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := w.writeTxn(ctx, cl)
			cancel()
			if err != nil {
				// The server was killed under it: a new client loads the
				// producer id again, which aborts what was open.
				cl.Close()
				cl = nil
				time.Sleep(20 * time.Millisecond)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	var m *mirrorProc
	serverKills, mirrorKills := 0, 0
	for range *mirrorKillCycles {
		if m == nil {
			m = startMirror(t, srcAddr, dstDir)
		}
		time.Sleep(time.Duration(100+rng.IntN(600)) * time.Millisecond)
		if rng.IntN(2) == 0 {
			src.kill()
			serverKills++
			time.Sleep(time.Duration(rng.IntN(200)) * time.Millisecond)
			src.start()
		} else {
			m.kill()
			mirrorKills++
			m = nil
		}
	}
	close(stop)
	wg.Wait()
	if m != nil {
		m.kill()
	}
	finishMirror(t, srcAddr, dstDir)
	want := readCommitted(t, []kgo.Opt{kgo.SeedBrokers(srcAddr)})
	var got map[int32][]*kgo.Record
	withEngineDir(t, dstDir, func(_ *engine.Engine, opts []kgo.Opt) { got = readCommitted(t, opts) })
	compareMirrored(t, want, got, 100)
	if w.aborted.Load() == 0 || serverKills == 0 || mirrorKills == 0 {
		t.Fatalf("aborted transactions %d, server kills %d, mirror kills %d: the cycles did not exercise all",
			w.aborted.Load(), serverKills, mirrorKills)
	}
}
