package interop

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/kafka"
)

// Sarama speaks older, non-flexible versions than franz-go and shares one
// connection for everything: a second client of `idemlog serve`.

func saramaServer(t *testing.T) (*engine.Engine, string) {
	t.Helper()
	e, err := engine.Open(t.TempDir(), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := kafka.New(e, kafka.Options{AutoCreateTopics: true})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() {
		srv.Close()
		e.Close()
	})
	return e, ln.Addr().String()
}

func saramaConfig() *sarama.Config {
	c := sarama.NewConfig()
	c.Version = sarama.V2_8_0_0
	c.Producer.Return.Successes = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Idempotent = true
	c.Net.MaxOpenRequests = 1
	c.Producer.Retry.Max = 10
	c.Metadata.AllowAutoTopicCreation = true
	return c
}

func txnConfig(id string) *sarama.Config {
	c := saramaConfig()
	c.Producer.Transaction.ID = id
	c.Producer.Transaction.Timeout = 10 * time.Second
	return c
}

func sendAll(t *testing.T, p sarama.SyncProducer, topic string, vals ...string) {
	t.Helper()
	for _, v := range vals {
		if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(v)}); err != nil {
			t.Fatalf("send %s: %v", v, err)
		}
	}
}

func TestSaramaIdempotentProducer(t *testing.T) {
	e, addr := saramaServer(t)
	if err := e.CreateTopic("s", 1); err != nil {
		t.Fatal(err)
	}
	p, err := sarama.NewSyncProducer([]string{addr}, saramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := range 20 {
		_, off, err := p.SendMessage(&sarama.ProducerMessage{Topic: "s", Value: sarama.StringEncoder(strconv.Itoa(i))})
		if err != nil || off != int64(i) {
			t.Fatalf("message %d: offset %d, %v", i, off, err)
		}
	}
	part, _ := e.Partition("s", 0)
	if part.Producers() != 1 {
		t.Fatalf("%d producer states, want 1 idempotent producer", part.Producers())
	}
}

// consumeAll reads partition 0 of topic from the start: want values, then
// checks that nothing else follows for a moment.
func consumeAll(t *testing.T, addr, topic string, isolation sarama.IsolationLevel, want int) []string {
	t.Helper()
	c := saramaConfig()
	c.Consumer.IsolationLevel = isolation
	c.Consumer.Return.Errors = true
	cons, err := sarama.NewConsumer([]string{addr}, c)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	pc, err := cons.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	var out []string
	timeout := time.After(20 * time.Second)
	for {
		var quiet <-chan time.Time
		if len(out) >= want {
			quiet = time.After(300 * time.Millisecond)
		}
		select {
		case m := <-pc.Messages():
			out = append(out, string(m.Value))
		case err := <-pc.Errors():
			t.Fatal(err)
		case <-timeout:
			t.Fatalf("read %v before timing out", out)
		case <-quiet:
			return out
		}
	}
}

func TestSaramaTransactions(t *testing.T) {
	e, addr := saramaServer(t)
	if err := e.CreateTopic("tx", 1); err != nil {
		t.Fatal(err)
	}
	p, err := sarama.NewSyncProducer([]string{addr}, txnConfig("sarama-tx"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	steps := []struct {
		vals   []string
		commit bool
	}{{[]string{"c1", "c2"}, true}, {[]string{"a1", "a2"}, false}, {[]string{"c3"}, true}}
	for _, s := range steps {
		if err := p.BeginTxn(); err != nil {
			t.Fatal(err)
		}
		sendAll(t, p, "tx", s.vals...)
		if s.commit {
			err = p.CommitTxn()
		} else {
			err = p.AbortTxn()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := fmt.Sprint(consumeAll(t, addr, "tx", sarama.ReadCommitted, 3)); got != "[c1 c2 c3]" {
		t.Fatalf("read_committed: %s", got)
	}
	if got := fmt.Sprint(consumeAll(t, addr, "tx", sarama.ReadUncommitted, 5)); got != "[c1 c2 a1 a2 c3]" {
		t.Fatalf("read_uncommitted: %s", got)
	}
}

// TestSaramaConsumeTransformProduce: a ConsumerGroup handler turns each
// input into one output inside a transaction that also commits the input
// offset (AddMessageToTxn).
func TestSaramaConsumeTransformProduce(t *testing.T) {
	e, addr := saramaServer(t)
	for _, topic := range []string{"in", "out"} {
		if err := e.CreateTopic(topic, 1); err != nil {
			t.Fatal(err)
		}
	}
	src, err := sarama.NewSyncProducer([]string{addr}, saramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	const n = 5
	for i := range n {
		sendAll(t, src, "in", strconv.Itoa(i))
	}
	src.Close()

	p, err := sarama.NewSyncProducer([]string{addr}, txnConfig("sarama-etl"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	gc := saramaConfig()
	gc.Consumer.Offsets.Initial = sarama.OffsetOldest
	gc.Consumer.IsolationLevel = sarama.ReadCommitted
	gc.Consumer.Offsets.AutoCommit.Enable = false
	group, err := sarama.NewConsumerGroup([]string{addr}, "sarama-g", gc)
	if err != nil {
		t.Fatal(err)
	}
	defer group.Close()
	h := &etlHandler{t: t, p: p, n: n, done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			if err := group.Consume(ctx, []string{"in"}, h); err != nil && ctx.Err() == nil {
				t.Errorf("consume: %v", err)
				return
			}
		}
	}()
	select {
	case <-h.done:
	case <-ctx.Done():
		t.Fatalf("transformed %d of %d", h.count(), n)
	}
	cancel()
	got := consumeAll(t, addr, "out", sarama.ReadCommitted, n)
	if fmt.Sprint(got) != "[out-0 out-1 out-2 out-3 out-4]" {
		t.Fatalf("output %v", got)
	}
	offs, err := e.Frontend().FetchOffsets("sarama-g", []engine.TopicPartition{{Topic: "in", Partition: 0}}, true)
	if err != nil {
		t.Fatal(err)
	}
	if o := offs[engine.TopicPartition{Topic: "in", Partition: 0}].Offset; o != n {
		t.Fatalf("group offset %d, want %d", o, n)
	}
}

type etlHandler struct {
	t    *testing.T
	p    sarama.SyncProducer
	n    int
	mu   sync.Mutex
	seen int
	done chan struct{}
}

func (h *etlHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seen
}

func (h *etlHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *etlHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *etlHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		if err := h.p.BeginTxn(); err != nil {
			return err
		}
		if _, _, err := h.p.SendMessage(&sarama.ProducerMessage{Topic: "out", Value: sarama.StringEncoder("out-" + string(m.Value))}); err != nil {
			h.p.AbortTxn()
			return err
		}
		if err := h.p.AddMessageToTxn(m, "sarama-g", nil); err != nil {
			h.p.AbortTxn()
			return err
		}
		if err := h.p.CommitTxn(); err != nil {
			return err
		}
		h.mu.Lock()
		h.seen++
		if h.seen == h.n {
			close(h.done)
		}
		h.mu.Unlock()
	}
	return nil
}
