package kafka

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func produceTxn(t testing.TB, cl *kgo.Client, topic string, values []string, commit bool) {
	t.Helper()
	ctx := ctxT(t)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, v := range values {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatal(err)
	}
}

// TestReadCommitted: a read_committed consumer sees committed records only
// (the aborted ones are filtered by the client with the aborted list and
// markers the fetch returns); read_uncommitted sees all of them.
func TestReadCommitted(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	cl := ts.client(t, kgo.TransactionalID("tx"))
	produceTxn(t, cl, "t", []string{"c1", "c2"}, true)
	produceTxn(t, cl, "t", []string{"a1", "a2"}, false)
	produceTxn(t, cl, "t", []string{"c3"}, true)

	got := consume(t, ts, "t", 3, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	var vals []string
	for _, r := range got {
		vals = append(vals, string(r.Value))
	}
	if fmt.Sprint(vals) != "[c1 c2 c3]" {
		t.Fatalf("read_committed got %v", vals)
	}
	all := consume(t, ts, "t", 5, kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
	if len(all) != 5 {
		t.Fatalf("read_uncommitted got %d records", len(all))
	}
}

// TestFetchWakesOnCommit: a read_committed fetch parked at the last stable
// offset answers when the transaction commits, long before MaxWait.
func TestFetchWakesOnCommit(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	cl := ts.client(t, kgo.TransactionalID("tx"))
	ctx := ctxT(t)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	rc := dial(t, ts.addr)
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.IsolationLevel = 11, 10000, 1, 1<<20, 1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "t"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	start := time.Now()
	rc.send(req)
	time.Sleep(200 * time.Millisecond)
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 11
	rc.recv(resp)
	p := resp.Topics[0].Partitions[0]
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("fetch took %v: not woken by the commit", took)
	}
	if p.ErrorCode != 0 || len(p.RecordBatches) == 0 || p.LastStableOffset != 2 || p.HighWatermark != 2 {
		t.Fatalf("fetch: code %d, %d bytes, lso %d, hw %d", p.ErrorCode, len(p.RecordBatches), p.LastStableOffset, p.HighWatermark)
	}
}

// TestFencing: a second instance of a transactional id fences the first,
// whose produce and commit are then rejected.
func TestFencing(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	old := ts.client(t, kgo.TransactionalID("tx"))
	if err := old.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := old.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("zombie")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	fresh := ts.client(t, kgo.TransactionalID("tx"))
	produceTxn(t, fresh, "t", []string{"live"}, true)
	err := old.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("zombie2")}).FirstErr()
	if err == nil {
		err = old.EndTransaction(ctx, kgo.TryCommit)
	}
	if !errors.Is(err, kerr.InvalidProducerEpoch) && !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("zombie: %v, want fenced", err)
	}
	got := consume(t, ts, "t", 1, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if len(got) != 1 || string(got[0].Value) != "live" {
		t.Fatalf("committed: %v", got)
	}
}

// TestGroupTransactSession runs kgo's consume-transform-produce session:
// every input record becomes exactly one committed output record and the
// group's offset ends at the input's end.
func TestGroupTransactSession(t *testing.T) {
	ts := startServer(t, Options{})
	for _, topic := range []string{"in", "out"} {
		if err := ts.eng.CreateTopic(topic, 2); err != nil {
			t.Fatal(err)
		}
	}
	ctx := ctxT(t)
	prod := ts.client(t, kgo.DefaultProduceTopic("in"))
	const n = 100
	for i := range n {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(ts.addr), kgo.TransactionalID("etl"),
		kgo.ConsumerGroup("g"), kgo.ConsumeTopics("in"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DefaultProduceTopic("out"))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	done := 0
	for done < n {
		fs := sess.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("transformed %d of %d: %v", done, n, ctx.Err())
		}
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, &kgo.Record{Value: append([]byte("out-"), r.Value...)}, nil)
		})
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			t.Fatal(err)
		}
		if committed {
			done += len(fs.Records())
		}
	}
	got := consume(t, ts, "out", n, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	seen := map[string]bool{}
	for _, r := range got {
		if seen[string(r.Value)] {
			t.Fatalf("duplicate output %s", r.Value)
		}
		seen[string(r.Value)] = true
	}
	if len(seen) != n {
		t.Fatalf("%d distinct outputs, want %d", len(seen), n)
	}
	rc := dial(t, ts.addr)
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Version, of.Group, of.RequireStable = 7, "g", true
	ofr := rc.roundTrip(of).(*kmsg.OffsetFetchResponse)
	var sum int64
	for _, tp := range ofr.Topics {
		for _, p := range tp.Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("offset fetch %s/%d: %d", tp.Topic, p.Partition, p.ErrorCode)
			}
			sum += p.Offset
		}
	}
	if sum != n {
		t.Fatalf("group offsets sum to %d, want %d", sum, n)
	}
}

// TestConsumerGroupCommits: a plain consumer group with autocommit leaves
// its offsets at the end of what it read.
func TestConsumerGroupCommits(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 3); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	prod := ts.client(t, kgo.DefaultProduceTopic("t"))
	for i := range 30 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl := ts.client(t, kgo.ConsumerGroup("plain"), kgo.ConsumeTopics("t"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	got := 0
	for got < 30 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal(ctx.Err())
		}
		got += len(fs.Records())
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	offs, err := ts.eng.FetchOffsets("plain", nil, false)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, om := range offs {
		sum += om.Offset
	}
	if sum != 30 {
		t.Fatalf("committed offsets sum to %d, want 30 (%v)", sum, offs)
	}
	_ = context.Background
}
