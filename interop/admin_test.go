package interop

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The admin APIs (ListGroups, DescribeGroups, DescribeConfigs,
// DeleteRecords, CreatePartitions) driven through sarama's ClusterAdmin and
// franz-go's kadm, as a user would.

func saramaAdmin(t *testing.T, addr string) sarama.ClusterAdmin {
	t.Helper()
	c := saramaConfig()
	c.ClientID = "r28-admin"
	a, err := sarama.NewClusterAdmin([]string{addr}, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

func kadmClient(t *testing.T, addr string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

func adminCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// produceValues sends vals to partition p of topic via a sarama producer
// with a manual partitioner.
func produceValues(t *testing.T, addr, topic string, p int32, vals ...string) {
	t.Helper()
	c := saramaConfig()
	c.Producer.Partitioner = sarama.NewManualPartitioner
	prod, err := sarama.NewSyncProducer([]string{addr}, c)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for _, v := range vals {
		if _, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: topic, Partition: p, Value: sarama.StringEncoder(v)}); err != nil {
			t.Fatalf("send %s to %s/%d: %v", v, topic, p, err)
		}
	}
}

// countingGroupHandler marks and commits every message; done closes once want
// messages were consumed and committed.
type countingGroupHandler struct {
	mu   sync.Mutex
	n    int
	want int
	done chan struct{}
}

func (h *countingGroupHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *countingGroupHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *countingGroupHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		s.MarkMessage(m, "")
		s.Commit()
		h.mu.Lock()
		h.n++
		if h.n == h.want {
			close(h.done)
		}
		h.mu.Unlock()
	}
	return nil
}

func TestSaramaConsumerGroupAdmin(t *testing.T) {
	e, addr := saramaServer(t)
	if err := e.CreateTopic("sg", 2); err != nil {
		t.Fatal(err)
	}
	produceValues(t, addr, "sg", 0, "a", "b", "c")
	produceValues(t, addr, "sg", 1, "d")

	c := saramaConfig()
	c.ClientID = "r28-consumer"
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Offsets.AutoCommit.Enable = false
	cg, err := sarama.NewConsumerGroup([]string{addr}, "r28-sgroup", c)
	if err != nil {
		t.Fatal(err)
	}
	h := &countingGroupHandler{want: 4, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if err := cg.Consume(ctx, []string{"sg"}, h); err != nil && ctx.Err() == nil {
				t.Errorf("consume: %v", err)
				return
			}
		}
	}()
	defer func() { cancel(); wg.Wait(); cg.Close() }()
	select {
	case <-h.done:
	case <-time.After(8 * time.Second):
		t.Fatal("group did not consume 4 messages")
	}

	a := saramaAdmin(t, addr)
	groups, err := a.ListConsumerGroups()
	if err != nil {
		t.Fatal(err)
	}
	if groups["r28-sgroup"] != "consumer" {
		t.Errorf("ListConsumerGroups = %v, want r28-sgroup: consumer", groups)
	}
	desc, err := a.DescribeConsumerGroups([]string{"r28-sgroup"})
	if err != nil {
		t.Fatal(err)
	}
	if len(desc) != 1 {
		t.Fatalf("%d groups described", len(desc))
	}
	d := desc[0]
	if d.Err != sarama.ErrNoError || d.State != "Stable" || d.ProtocolType != "consumer" || d.Protocol != "range" {
		t.Errorf("group: err %v state %q type %q protocol %q, want Stable consumer range", d.Err, d.State, d.ProtocolType, d.Protocol)
	}
	if len(d.Members) != 1 {
		t.Fatalf("%d members, want 1", len(d.Members))
	}
	for id, m := range d.Members {
		if m.MemberId != id || m.ClientId != "r28-consumer" || m.ClientHost != "/127.0.0.1" {
			t.Errorf("member %q: id %q client %q host %q", id, m.MemberId, m.ClientId, m.ClientHost)
		}
		meta, err := m.GetMemberMetadata()
		if err != nil || !slices.Equal(meta.Topics, []string{"sg"}) {
			t.Errorf("member metadata %+v, %v", meta, err)
		}
		as, err := m.GetMemberAssignment()
		if err != nil {
			t.Fatal(err)
		}
		got := slices.Clone(as.Topics["sg"])
		slices.Sort(got)
		if !slices.Equal(got, []int32{0, 1}) {
			t.Errorf("assignment %v, want sg [0 1]", as.Topics)
		}
	}
	offs, err := a.ListConsumerGroupOffsets("r28-sgroup", map[string][]int32{"sg": {0, 1}})
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[int32]int64{0: 3, 1: 1} {
		b := offs.GetBlock("sg", p)
		if b == nil || b.Err != sarama.ErrNoError || b.Offset != want {
			t.Errorf("committed sg/%d = %+v, want %d", p, b, want)
		}
	}
	// All offsets (nil topic map: every committed partition).
	all, err := a.ListConsumerGroupOffsets("r28-sgroup", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Blocks["sg"]) != 2 {
		t.Errorf("all committed offsets: %v", all.Blocks)
	}
	// Unknown group: Dead, no members, no error.
	desc, err = a.DescribeConsumerGroups([]string{"r28-nosuch"})
	if err != nil || len(desc) != 1 || desc[0].State != "Dead" || len(desc[0].Members) != 0 || desc[0].Err != sarama.ErrNoError {
		t.Errorf("unknown group: %+v, %v", desc, err)
	}

	// After the consumer leaves, the group is Empty and still listed.
	cancel()
	wg.Wait()
	if err := cg.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		desc, err = a.DescribeConsumerGroups([]string{"r28-sgroup"})
		if err == nil && len(desc) == 1 && desc[0].State == "Empty" && len(desc[0].Members) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after leave: %+v, %v", desc, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	groups, err = a.ListConsumerGroups()
	if err != nil || groups["r28-sgroup"] != "consumer" {
		t.Errorf("ListConsumerGroups after leave = %v, %v", groups, err)
	}
}

func configEntry(entries []sarama.ConfigEntry, name string) (sarama.ConfigEntry, bool) {
	for _, e := range entries {
		if e.Name == name {
			return e, true
		}
	}
	return sarama.ConfigEntry{}, false
}

func TestSaramaDescribeConfig(t *testing.T) {
	e, addr := saramaServer(t)
	if err := e.CreateTopic("sc", 1, map[string]string{"retention.ms": "3600000"}); err != nil {
		t.Fatal(err)
	}
	a := saramaAdmin(t, addr)
	//lint:ignore SA1019 the one-resource call tools built on sarama still make
	entries, err := a.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: "sc"})
	if err != nil {
		t.Fatal(err)
	}
	ret, ok := configEntry(entries, "retention.ms")
	if !ok || ret.Value != "3600000" || ret.Source != sarama.SourceTopic || ret.Default || ret.ReadOnly {
		t.Errorf("retention.ms = %+v", ret)
	}
	seg, ok := configEntry(entries, "segment.bytes")
	if !ok || seg.Source != sarama.SourceDefault || !seg.Default {
		t.Errorf("segment.bytes = %+v", seg)
	}
	cp, ok := configEntry(entries, "cleanup.policy")
	if !ok || cp.Value != "delete" {
		t.Errorf("cleanup.policy = %+v", cp)
	}
	// ConfigNames filter.
	//lint:ignore SA1019 the one-resource call tools built on sarama still make
	entries, err = a.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: "sc", ConfigNames: []string{"retention.ms"}})
	if err != nil || len(entries) != 1 || entries[0].Name != "retention.ms" {
		t.Errorf("filtered: %+v, %v", entries, err)
	}
	// Unknown topic: an error.
	//lint:ignore SA1019 the one-resource call tools built on sarama still make
	if _, err := a.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: "r28-nosuch"}); err == nil {
		t.Error("describe unknown topic: no error")
	}
	// The broker.
	//lint:ignore SA1019 the one-resource call tools built on sarama still make
	entries, err = a.DescribeConfig(sarama.ConfigResource{Type: sarama.BrokerResource, Name: "0"})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"broker.id": "0", "log.retention.ms": "604800000", "auto.create.topics.enable": "true", "message.max.bytes": ""} {
		got, ok := configEntry(entries, name)
		if !ok || (want != "" && got.Value != want) {
			t.Errorf("broker %s = %+v (found %v), want %q", name, got, ok, want)
		}
	}
	if lr, _ := configEntry(entries, "log.retention.ms"); lr.Source != sarama.SourceDefault {
		t.Errorf("log.retention.ms source %v, want default", lr.Source)
	}
}

func TestSaramaDeleteRecords(t *testing.T) {
	e, addr := saramaServer(t)
	if err := e.CreateTopic("sd", 1); err != nil {
		t.Fatal(err)
	}
	var vals []string
	for i := range 10 {
		vals = append(vals, fmt.Sprint(i))
	}
	produceValues(t, addr, "sd", 0, vals...)
	a := saramaAdmin(t, addr)
	if err := a.DeleteRecords("sd", map[int32]int64{0: 4}); err != nil {
		t.Fatal(err)
	}
	cl, err := sarama.NewClient([]string{addr}, saramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if lo, err := cl.GetOffset("sd", 0, sarama.OffsetOldest); err != nil || lo != 4 {
		t.Errorf("log start after delete = %d, %v, want 4", lo, err)
	}
	got := consumeAll(t, addr, "sd", sarama.ReadUncommitted, 6)
	if !slices.Equal(got, vals[4:]) {
		t.Errorf("consumed %v, want %v", got, vals[4:])
	}
	// Beyond the high watermark: OFFSET_OUT_OF_RANGE.
	if err := a.DeleteRecords("sd", map[int32]int64{0: 11}); err == nil {
		t.Error("delete beyond high watermark: no error")
	}
	// -1: up to the high watermark.
	if err := a.DeleteRecords("sd", map[int32]int64{0: -1}); err != nil {
		t.Fatal(err)
	}
	if lo, err := cl.GetOffset("sd", 0, sarama.OffsetOldest); err != nil || lo != 10 {
		t.Errorf("log start after delete all = %d, %v, want 10", lo, err)
	}
	produceValues(t, addr, "sd", 0, "10")
	if lo, err := cl.GetOffset("sd", 0, sarama.OffsetOldest); err != nil || lo != 10 {
		t.Errorf("log start after produce = %d, %v, want 10", lo, err)
	}
}

func TestSaramaCreatePartitions(t *testing.T) {
	e, addr := saramaServer(t)
	if err := e.CreateTopic("sp", 1); err != nil {
		t.Fatal(err)
	}
	a := saramaAdmin(t, addr)
	// validateOnly changes nothing.
	if err := a.CreatePartitions("sp", 3, nil, true); err != nil {
		t.Fatal(err)
	}
	cl, err := sarama.NewClient([]string{addr}, saramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.RefreshMetadata("sp"); err != nil {
		t.Fatal(err)
	}
	if ps, _ := cl.Partitions("sp"); len(ps) != 1 {
		t.Errorf("after validateOnly: %v partitions", ps)
	}
	if err := a.CreatePartitions("sp", 3, nil, false); err != nil {
		t.Fatal(err)
	}
	if err := cl.RefreshMetadata("sp"); err != nil {
		t.Fatal(err)
	}
	if ps, err := cl.Partitions("sp"); err != nil || !slices.Equal(ps, []int32{0, 1, 2}) {
		t.Errorf("partitions = %v, %v, want [0 1 2]", ps, err)
	}
	topics, err := a.DescribeTopics([]string{"sp"})
	if err != nil || len(topics) != 1 || len(topics[0].Partitions) != 3 {
		t.Errorf("DescribeTopics: %+v, %v", topics, err)
	}
	// Produce to and consume from a new partition.
	produceValues(t, addr, "sp", 2, "x", "y")
	cons, err := sarama.NewConsumer([]string{addr}, saramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	pc, err := cons.ConsumePartition("sp", 2, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	for _, want := range []string{"x", "y"} {
		select {
		case m := <-pc.Messages():
			if string(m.Value) != want {
				t.Errorf("got %q, want %q", m.Value, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no message from new partition")
		}
	}
	// Shrinking or keeping the count is INVALID_PARTITIONS.
	err = a.CreatePartitions("sp", 2, nil, false)
	if err == nil {
		t.Error("shrink: no error")
	} else if !errorsContains(err, sarama.ErrInvalidPartitions) {
		t.Errorf("shrink: %v, want INVALID_PARTITIONS", err)
	}
	// Unknown topic.
	if err := a.CreatePartitions("r28-nosuch", 2, nil, false); err == nil {
		t.Error("unknown topic: no error")
	}
}

func errorsContains(err error, target sarama.KError) bool {
	if te, ok := err.(*sarama.TopicPartitionError); ok {
		return te.Err == target
	}
	return err == target
}

// --- franz-go kadm ---

func TestKadmGroups(t *testing.T) {
	e, addr := saramaServer(t)
	if err := e.CreateTopic("kg", 2); err != nil {
		t.Fatal(err)
	}
	adm := kadmClient(t, addr)
	ctx := adminCtx(t)
	prod := kgoProducer(t, addr)
	for i, p := range []int32{0, 0, 1, 1, 1} {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "kg", Partition: p, Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("r28-kclient"), kgo.ConsumerGroup("r28-kgroup"),
		kgo.ConsumeTopics("kg"), kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	n := 0
	for n < 5 {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of 5", n)
		}
		fs.EachError(func(t2 string, p int32, err error) { t.Errorf("fetch %s/%d: %v", t2, p, err) })
		n += fs.NumRecords()
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}

	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lg, ok := listed["r28-kgroup"]
	if !ok || lg.ProtocolType != "consumer" || lg.State != "Stable" || lg.Coordinator != 0 {
		t.Errorf("ListGroups: %+v", listed)
	}
	listed, err = adm.ListGroups(ctx, "Empty")
	if err != nil || len(listed) != 0 {
		t.Errorf("ListGroups(Empty) = %+v, %v, want none", listed, err)
	}
	listed, err = adm.ListGroups(ctx, "Stable")
	if _, ok := listed["r28-kgroup"]; err != nil || !ok {
		t.Errorf("ListGroups(Stable) = %+v, %v", listed, err)
	}

	described, err := adm.DescribeGroups(ctx, "r28-kgroup")
	if err != nil {
		t.Fatal(err)
	}
	d := described["r28-kgroup"]
	if d.Err != nil || d.State != "Stable" || d.ProtocolType != "consumer" || d.Protocol != "cooperative-sticky" {
		t.Errorf("group: err %v state %q type %q protocol %q", d.Err, d.State, d.ProtocolType, d.Protocol)
	}
	if len(d.Members) != 1 {
		t.Fatalf("%d members", len(d.Members))
	}
	m := d.Members[0]
	if m.ClientID != "r28-kclient" || m.ClientHost != "/127.0.0.1" || m.MemberID == "" {
		t.Errorf("member %+v", m)
	}
	if j, ok := m.Join.AsConsumer(); !ok || !slices.Equal(j.Topics, []string{"kg"}) {
		t.Errorf("join metadata %+v", m.Join)
	}
	if got := d.AssignedPartitions().Sorted(); len(got) != 1 || !slices.Equal(got[0].Partitions, []int32{0, 1}) {
		t.Errorf("assigned %v", got)
	}

	offs, err := adm.FetchOffsets(ctx, "r28-kgroup")
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[int32]int64{0: 2, 1: 3} {
		o, ok := offs.Lookup("kg", p)
		if !ok || o.Err != nil || o.At != want {
			t.Errorf("committed kg/%d = %+v, want %d", p, o, want)
		}
	}
	lag, err := adm.Lag(ctx, "r28-kgroup")
	if err != nil {
		t.Fatal(err)
	}
	if gl := lag["r28-kgroup"]; gl.Error() != nil || gl.Lag.Total() != 0 {
		t.Errorf("lag %+v (err %v)", gl.Lag, gl.Error())
	}

	// The member leaves: Empty, no members, no protocol.
	cons.Close()
	described, err = adm.DescribeGroups(ctx, "r28-kgroup")
	if d := described["r28-kgroup"]; err != nil || d.State != "Empty" || len(d.Members) != 0 || d.Protocol != "" {
		t.Errorf("after leave: %+v, %v", d, err)
	}
	// A group that only has offsets (committed by an admin) is listed
	// Empty with no protocol type, and described Empty.
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "kg", Partition: 0, At: 1})
	if err := adm.CommitAllOffsets(ctx, "r28-offonly", os); err != nil {
		t.Fatal(err)
	}
	listed, err = adm.ListGroups(ctx)
	if lg, ok := listed["r28-offonly"]; err != nil || !ok || lg.State != "Empty" || lg.ProtocolType != "" {
		t.Errorf("offsets-only group listed %+v (%v), %v", lg, ok, err)
	}
	if lg := listed["r28-kgroup"]; lg.State != "Empty" || lg.ProtocolType != "consumer" {
		t.Errorf("left group listed %+v", lg)
	}
	described, err = adm.DescribeGroups(ctx, "r28-offonly", "r28-nosuch")
	if err != nil || described["r28-offonly"].State != "Empty" || described["r28-nosuch"].State != "Dead" {
		t.Errorf("describe offsets-only / unknown: %+v, %v", described, err)
	}
}

func TestKadmConfigs(t *testing.T) {
	e, addr := saramaServer(t)
	if err := e.CreateTopic("kc", 1, map[string]string{"retention.ms": "3600000", "max.message.bytes": "65536"}); err != nil {
		t.Fatal(err)
	}
	adm := kadmClient(t, addr)
	ctx := adminCtx(t)
	rcs, err := adm.DescribeTopicConfigs(ctx, "kc")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("kc", nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("kc: %v %v", err, rc.Err)
	}
	find := func(cs []kadm.Config, k string) kadm.Config {
		for _, c := range cs {
			if c.Key == k {
				return c
			}
		}
		t.Errorf("no config %s", k)
		return kadm.Config{}
	}
	ret := find(rc.Configs, "retention.ms")
	if ret.MaybeValue() != "3600000" || ret.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Errorf("retention.ms %s source %v", ret.MaybeValue(), ret.Source)
	}
	// kadm asks for synonyms: the topic's own, then the broker default.
	if len(ret.Synonyms) != 2 || ret.Synonyms[0].Key != "retention.ms" || ret.Synonyms[1].Key != "log.retention.ms" ||
		ret.Synonyms[1].Value == nil || *ret.Synonyms[1].Value != "604800000" || ret.Synonyms[1].Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("retention.ms synonyms %+v", ret.Synonyms)
	}
	mmb := find(rc.Configs, "max.message.bytes")
	if mmb.MaybeValue() != "65536" || mmb.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Errorf("max.message.bytes %s source %v", mmb.MaybeValue(), mmb.Source)
	}
	sb := find(rc.Configs, "segment.bytes")
	if sb.Source != kmsg.ConfigSourceDefaultConfig || sb.MaybeValue() == "" {
		t.Errorf("segment.bytes %s source %v", sb.MaybeValue(), sb.Source)
	}
	// Unknown topic: an error on the resource.
	rcs, err = adm.DescribeTopicConfigs(ctx, "r28-nosuch")
	if err == nil {
		if rc, _ := rcs.On("r28-nosuch", nil); rc.Err == nil {
			t.Errorf("unknown topic: no error: %+v", rcs)
		}
	}

	// The broker, by id and cluster-wide (no ids).
	bcs, err := adm.DescribeBrokerConfigs(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(bcs) != 1 || bcs[0].Err != nil {
		t.Fatalf("broker configs %+v", bcs)
	}
	bid := find(bcs[0].Configs, "broker.id")
	if bid.MaybeValue() != "0" || bid.Source != kmsg.ConfigSourceStaticBrokerConfig {
		t.Errorf("broker.id %s %v", bid.MaybeValue(), bid.Source)
	}
	lrm := find(bcs[0].Configs, "log.retention.ms")
	if lrm.MaybeValue() != "604800000" || lrm.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("log.retention.ms %s %v", lrm.MaybeValue(), lrm.Source)
	}
	bcs, err = adm.DescribeBrokerConfigs(ctx)
	if err != nil || len(bcs) != 1 || bcs[0].Err != nil {
		t.Errorf("cluster-wide broker configs %+v, %v", bcs, err)
	}
	// Another broker id: an error.
	bcs, err = adm.DescribeBrokerConfigs(ctx, 7)
	if err == nil && (len(bcs) != 1 || bcs[0].Err == nil) {
		t.Errorf("broker 7: %+v", bcs)
	}
}

func TestKadmDeleteRecordsAndCreatePartitions(t *testing.T) {
	e, addr := saramaServer(t)
	if err := e.CreateTopic("kd", 1); err != nil {
		t.Fatal(err)
	}
	adm := kadmClient(t, addr)
	ctx := adminCtx(t)
	prod := kgoProducer(t, addr)
	for i := range 10 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "kd", Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "kd", Partition: 0, At: 6})
	drs, err := adm.DeleteRecords(ctx, os)
	if err != nil {
		t.Fatal(err)
	}
	dr, ok := drs.Lookup("kd", 0)
	if !ok || dr.Err != nil || dr.LowWatermark != 6 {
		t.Errorf("DeleteRecords: %+v", dr)
	}
	starts, err := adm.ListStartOffsets(ctx, "kd")
	if err != nil {
		t.Fatal(err)
	}
	if lo, ok := starts.Lookup("kd", 0); !ok || lo.Err != nil || lo.Offset != 6 {
		t.Errorf("start offset %+v", lo)
	}
	ends, err := adm.ListEndOffsets(ctx, "kd")
	if err != nil {
		t.Fatal(err)
	}
	if hi, ok := ends.Lookup("kd", 0); !ok || hi.Err != nil || hi.Offset != 10 {
		t.Errorf("end offset %+v", hi)
	}
	// Below the log start: the low watermark stays.
	os = nil
	os.Add(kadm.Offset{Topic: "kd", Partition: 0, At: 3})
	drs, err = adm.DeleteRecords(ctx, os)
	if dr, _ := drs.Lookup("kd", 0); err != nil || dr.Err != nil || dr.LowWatermark != 6 {
		t.Errorf("DeleteRecords below start: %+v, %v", dr, err)
	}
	// Beyond the high watermark.
	os = nil
	os.Add(kadm.Offset{Topic: "kd", Partition: 0, At: 11})
	drs, err = adm.DeleteRecords(ctx, os)
	if dr, _ := drs.Lookup("kd", 0); err == nil && dr.Err == nil {
		t.Errorf("DeleteRecords beyond HW: %+v", dr)
	}

	// Consumption from the start continues at the new log start.
	cons, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"kd": {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var got []string
	for len(got) < 4 {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %v", got)
		}
		fs.EachError(func(t2 string, p int32, err error) { t.Errorf("fetch %s/%d: %v", t2, p, err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, fmt.Sprintf("%d:%s", r.Offset, r.Value)) })
	}
	if !slices.Equal(got, []string{"6:6", "7:7", "8:8", "9:9"}) {
		t.Errorf("consumed %v", got)
	}

	// CreatePartitions: add 2.
	cps, err := adm.CreatePartitions(ctx, 2, "kd")
	if err != nil {
		t.Fatal(err)
	}
	if cp := cps["kd"]; cp.Err != nil {
		t.Fatalf("CreatePartitions: %v %s", cp.Err, cp.ErrMessage)
	}
	md, err := adm.Metadata(ctx, "kd")
	if err != nil {
		t.Fatal(err)
	}
	if td := md.Topics["kd"]; td.Err != nil || len(td.Partitions) != 3 {
		t.Errorf("metadata after CreatePartitions: %+v", td)
	}
	ends, err = adm.ListEndOffsets(ctx, "kd")
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[int32]int64{0: 10, 1: 0, 2: 0} {
		if hi, ok := ends.Lookup("kd", p); !ok || hi.Err != nil || hi.Offset != want {
			t.Errorf("end offset kd/%d %+v, want %d", p, hi, want)
		}
	}
	// UpdatePartitions to the same count: INVALID_PARTITIONS.
	cps, err = adm.UpdatePartitions(ctx, 3, "kd")
	if err == nil && cps["kd"].Err == nil {
		t.Errorf("UpdatePartitions(3): no error")
	}
	// UpdatePartitions to 5, then produce to partition 4.
	cps, err = adm.UpdatePartitions(ctx, 5, "kd")
	if err != nil || cps["kd"].Err != nil {
		t.Fatalf("UpdatePartitions(5): %v %+v", err, cps)
	}
	// A fresh producer: prod's cached metadata still says 1 partition.
	prod2 := kgoProducer(t, addr)
	if err := prod2.ProduceSync(ctx, &kgo.Record{Topic: "kd", Partition: 4, Value: []byte("p4")}).FirstErr(); err != nil {
		t.Fatalf("produce to new partition 4: %v", err)
	}
	ends, err = adm.ListEndOffsets(ctx, "kd")
	if hi, _ := ends.Lookup("kd", 4); err != nil || hi.Offset != 1 {
		t.Errorf("end offset kd/4 %+v, %v", hi, err)
	}
}

// Sarama's admin at an old (v0 requests) and a new version.
func TestSaramaAdminVersions(t *testing.T) {
	for _, v := range []sarama.KafkaVersion{sarama.V1_0_0_0, sarama.V2_0_0_0, sarama.V3_6_0_0} {
		t.Run(v.String(), func(t *testing.T) {
			e, addr := saramaServer(t)
			if err := e.CreateTopic("sv", 1, map[string]string{"retention.ms": "3600000"}); err != nil {
				t.Fatal(err)
			}
			produceValues(t, addr, "sv", 0, "0", "1", "2", "3")
			c := saramaConfig()
			c.Version = v
			a, err := sarama.NewClusterAdmin([]string{addr}, c)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			//lint:ignore SA1019 the one-resource call tools built on sarama still make
			entries, err := a.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: "sv"})
			if err != nil {
				t.Fatal(err)
			}
			ret, _ := configEntry(entries, "retention.ms")
			seg, _ := configEntry(entries, "segment.bytes")
			if ret.Value != "3600000" || ret.Default || !seg.Default {
				t.Errorf("retention.ms %+v segment.bytes %+v", ret, seg)
			}
			if v.IsAtLeast(sarama.V1_1_0_0) && (ret.Source != sarama.SourceTopic || seg.Source != sarama.SourceDefault) {
				t.Errorf("sources: retention.ms %v segment.bytes %v", ret.Source, seg.Source)
			}
			//lint:ignore SA1019 the one-resource call tools built on sarama still make
			if _, err := a.DescribeConfig(sarama.ConfigResource{Type: sarama.BrokerResource, Name: "0"}); err != nil {
				t.Errorf("broker: %v", err)
			}
			if _, err := a.ListConsumerGroups(); err != nil {
				t.Errorf("list groups: %v", err)
			}
			d, err := a.DescribeConsumerGroups([]string{"nosuch"})
			if err != nil || len(d) != 1 || d[0].State != "Dead" {
				t.Errorf("describe: %+v, %v", d, err)
			}
			if err := a.DeleteRecords("sv", map[int32]int64{0: 2}); err != nil {
				t.Errorf("delete records: %v", err)
			}
			if err := a.CreatePartitions("sv", 2, nil, false); err != nil {
				t.Errorf("create partitions: %v", err)
			}
			topics, err := a.DescribeTopics([]string{"sv"})
			if err != nil || len(topics) != 1 || len(topics[0].Partitions) != 2 {
				t.Errorf("DescribeTopics: %+v, %v", topics, err)
			}
		})
	}
}

// kgoProducer is a kgo client that writes to the partition each record names.
func kgoProducer(t *testing.T, addr string) *kgo.Client {
	t.Helper()
	prod, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prod.Close)
	return prod
}
