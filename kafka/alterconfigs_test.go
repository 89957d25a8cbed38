package kafka

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func strp(s string) *string { return &s }

// createWithConfigs sends CreateTopics v7 for one topic and returns its
// answer.
func createWithConfigs(rc *rawConn, topic string, validateOnly bool, kv ...*string) kmsg.CreateTopicsResponseTopic {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version, req.ValidateOnly, req.TimeoutMillis = 7, validateOnly, 5000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 2, 1
	for i := 0; i+1 < len(kv); i += 2 {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = *kv[i], kv[i+1]
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	return rc.roundTrip(req).(*kmsg.CreateTopicsResponse).Topics[0]
}

// TestCreateTopicsConfigs: the configs Kafka Connect, Streams and Spring
// set when they create topics are accepted, including at their defaults;
// bad ones get INVALID_CONFIG with Kafka's message; v5+ answers with the
// topic's configs.
func TestCreateTopicsConfigs(t *testing.T) {
	ts := startServer(t, Options{})
	rc := dial(t, ts.addr)
	got := createWithConfigs(rc, "connect-offsets", false,
		strp("cleanup.policy"), strp("compact"), strp("compression.type"), strp("producer"),
		strp("message.timestamp.type"), strp("CreateTime"), strp("min.insync.replicas"), strp("1"),
		strp("unclean.leader.election.enable"), strp("false"), strp("retention.ms"), strp("60000"))
	if got.ErrorCode != 0 {
		t.Fatalf("create: %d %v", got.ErrorCode, *got.ErrorMessage)
	}
	cfg := map[string]kmsg.CreateTopicsResponseTopicConfig{}
	for _, c := range got.Configs {
		cfg[c.Name] = c
	}
	if c := cfg["cleanup.policy"]; c.Value == nil || *c.Value != "compact" || c.Source != int8(kmsg.ConfigSourceDynamicTopicConfig) {
		t.Fatalf("cleanup.policy in the answer: %+v", c)
	}
	if c := cfg["segment.bytes"]; c.Value == nil || *c.Value != "1073741824" || c.Source != int8(kmsg.ConfigSourceDefaultConfig) {
		t.Fatalf("segment.bytes in the answer: %+v", c)
	}
	for _, c := range []struct {
		kv   []*string
		code int16
		msg  string
	}{
		{[]*string{strp("retention.ms"), strp("soon")}, kerr.InvalidConfig.Code, "Invalid value soon for configuration retention.ms: Not a number of type LONG"},
		{[]*string{strp("no.such"), strp("1")}, kerr.InvalidConfig.Code, "Unknown topic config name: no.such"},
		{[]*string{strp("retention.ms"), nil}, kerr.InvalidConfig.Code, "Null value not supported for topic configs: retention.ms"},
	} {
		got := createWithConfigs(rc, "bad", false, c.kv...)
		if got.ErrorCode != c.code || got.ErrorMessage == nil || *got.ErrorMessage != c.msg {
			t.Errorf("%v: %d %v, want %d %q", c.kv, got.ErrorCode, got.ErrorMessage, c.code, c.msg)
		}
	}
	if _, ok := ts.eng.Topics()["bad"]; ok {
		t.Fatal("a refused topic was created")
	}
}

// alterResource is one IncrementalAlterConfigs resource for a topic.
func alterResource(topic string, ops ...kmsg.IncrementalAlterConfigsRequestResourceConfig) kmsg.IncrementalAlterConfigsRequestResource {
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName, r.Configs = kmsg.ConfigResourceTypeTopic, topic, ops
	return r
}

func op(name string, kind kmsg.IncrementalAlterConfigOp, value *string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = name, kind, value
	return c
}

// describeTopic returns a topic's configs by name.
func describeTopic(rc *rawConn, topic string) map[string]kmsg.DescribeConfigsResponseResourceConfig {
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.Version = 4
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	req.Resources = append(req.Resources, r)
	out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range rc.roundTrip(req).(*kmsg.DescribeConfigsResponse).Resources[0].Configs {
		out[c.Name] = c
	}
	return out
}

// TestIncrementalAlterConfigs: kafka-configs --alter over the wire: per
// resource all or nothing, Kafka's codes and messages, validate-only, and
// DescribeConfigs showing the change.
func TestIncrementalAlterConfigs(t *testing.T) {
	ts := startServer(t, Options{})
	rc := dial(t, ts.addr)
	if got := createWithConfigs(rc, "t", false); got.ErrorCode != 0 {
		t.Fatal(got.ErrorCode)
	}
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.Version = 1
	req.Resources = []kmsg.IncrementalAlterConfigsRequestResource{
		alterResource("t", op("retention.ms", kmsg.IncrementalAlterConfigOpSet, strp("120000")),
			op("cleanup.policy", kmsg.IncrementalAlterConfigOpAppend, strp("compact"))),
		alterResource("missing", op("retention.ms", kmsg.IncrementalAlterConfigOpSet, strp("1"))),
		alterResource("", op("retention.ms", kmsg.IncrementalAlterConfigOpSet, strp("1"))),
	}
	resp := rc.roundTrip(req).(*kmsg.IncrementalAlterConfigsResponse)
	want := []struct {
		code int16
		msg  string
	}{{0, ""}, {kerr.UnknownTopicOrPartition.Code, "The topic 'missing' does not exist."}, {kerr.InvalidRequest.Code, "Default topic resources are not allowed."}}
	for i, w := range want {
		r := resp.Resources[i]
		if r.ErrorCode != w.code || (w.msg != "" && (r.ErrorMessage == nil || *r.ErrorMessage != w.msg)) {
			t.Fatalf("resource %d: %d %v, want %d %q", i, r.ErrorCode, r.ErrorMessage, w.code, w.msg)
		}
	}
	cfg := describeTopic(rc, "t")
	if c := cfg["retention.ms"]; *c.Value != "120000" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("retention.ms: %+v", c)
	}
	if c := cfg["cleanup.policy"]; *c.Value != "delete,compact" {
		t.Fatalf("cleanup.policy: %v", *c.Value)
	}

	// A bad value and a null value: nothing of the resource changes.
	req.Resources = []kmsg.IncrementalAlterConfigsRequestResource{
		alterResource("t", op("retention.ms", kmsg.IncrementalAlterConfigOpSet, strp("1")),
			op("segment.bytes", kmsg.IncrementalAlterConfigOpSet, strp("2"))),
	}
	r := rc.roundTrip(req).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]
	if r.ErrorCode != kerr.InvalidConfig.Code || *r.ErrorMessage != "Invalid value 2 for configuration segment.bytes: Value must be at least 14" {
		t.Fatalf("bad value: %d %v", r.ErrorCode, *r.ErrorMessage)
	}
	req.Resources = []kmsg.IncrementalAlterConfigsRequestResource{
		alterResource("t", op("retention.ms", kmsg.IncrementalAlterConfigOpSet, nil)),
	}
	if r := rc.roundTrip(req).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]; r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("null value: %d", r.ErrorCode)
	}
	// The same resource twice: both refused.
	req.Resources = []kmsg.IncrementalAlterConfigsRequestResource{
		alterResource("t", op("retention.ms", kmsg.IncrementalAlterConfigOpSet, strp("1"))),
		alterResource("t", op("retention.ms", kmsg.IncrementalAlterConfigOpSet, strp("2"))),
	}
	for i, r := range rc.roundTrip(req).(*kmsg.IncrementalAlterConfigsResponse).Resources {
		if r.ErrorCode != kerr.InvalidRequest.Code {
			t.Fatalf("twice, copy %d: %d", i, r.ErrorCode)
		}
	}
	// Validate only: answered, not stored.
	req.ValidateOnly = true
	req.Resources = []kmsg.IncrementalAlterConfigsRequestResource{
		alterResource("t", op("retention.ms", kmsg.IncrementalAlterConfigOpDelete, nil)),
	}
	if r := rc.roundTrip(req).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]; r.ErrorCode != 0 {
		t.Fatalf("validate only: %d", r.ErrorCode)
	}
	if c := describeTopic(rc, "t")["retention.ms"]; *c.Value != "120000" {
		t.Fatalf("validate only changed retention.ms to %s", *c.Value)
	}
}

// TestAlterConfigs: the legacy AlterConfigs replaces a topic's overrides
// with the pairs it lists.
func TestAlterConfigs(t *testing.T) {
	ts := startServer(t, Options{})
	rc := dial(t, ts.addr)
	if got := createWithConfigs(rc, "t", false, strp("retention.ms"), strp("60000")); got.ErrorCode != 0 {
		t.Fatal(got.ErrorCode)
	}
	req := kmsg.NewPtrAlterConfigsRequest()
	req.Version = 2
	r := kmsg.NewAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
	c := kmsg.NewAlterConfigsRequestResourceConfig()
	c.Name, c.Value = "segment.ms", strp("3600000")
	r.Configs = append(r.Configs, c)
	req.Resources = append(req.Resources, r)
	if got := rc.roundTrip(req).(*kmsg.AlterConfigsResponse).Resources[0]; got.ErrorCode != 0 {
		t.Fatalf("alter: %d %v", got.ErrorCode, got.ErrorMessage)
	}
	cfg := describeTopic(rc, "t")
	if c := cfg["retention.ms"]; c.Source != kmsg.ConfigSourceDefaultConfig || *c.Value != "604800000" {
		t.Fatalf("retention.ms not listed, still overridden: %+v", c)
	}
	if c := cfg["segment.ms"]; c.Source != kmsg.ConfigSourceDynamicTopicConfig || *c.Value != "3600000" {
		t.Fatalf("segment.ms: %+v", c)
	}
	// The broker's configs are its startup options.
	req.Resources[0].ResourceType, req.Resources[0].ResourceName = kmsg.ConfigResourceTypeBroker, "0"
	if got := rc.roundTrip(req).(*kmsg.AlterConfigsResponse).Resources[0]; got.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("broker: %d", got.ErrorCode)
	}
}

// TestProduceListedFromV0: ApiVersions lists Produce from version 0 (so
// librdkafka compresses), while a v0-v2 Produce closes the connection, as
// Kafka 4.0 does.
func TestProduceListedFromV0(t *testing.T) {
	ts := startServer(t, Options{})
	rc := dial(t, ts.addr)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
	found := false
	for _, k := range rc.roundTrip(req).(*kmsg.ApiVersionsResponse).ApiKeys {
		if k.ApiKey == kmsg.Produce.Int16() {
			found = k.MinVersion == 0 && k.MaxVersion >= 9
		}
	}
	if !found {
		t.Fatal("Produce not listed from version 0")
	}
	p := kmsg.NewPtrProduceRequest()
	p.Version, p.Acks, p.TimeoutMillis = 2, 1, 1000
	rc.send(p)
	rc.expectClosed()
}

// TestLogAppendTimeOverTheWire: on a LogAppendTime topic a kgo producer's
// records come back with the broker's append time, and the produce
// response carries it.
func TestLogAppendTimeOverTheWire(t *testing.T) {
	ts := startServer(t, Options{})
	rc := dial(t, ts.addr)
	if got := createWithConfigs(rc, "lat", false, strp("message.timestamp.type"), strp("LogAppendTime")); got.ErrorCode != 0 {
		t.Fatal(got.ErrorCode)
	}
	cl := ts.client(t)
	old := time.UnixMilli(1000)
	before := time.Now().Add(-time.Second)
	res := cl.ProduceSync(ctxT(t), &kgo.Record{Topic: "lat", Partition: 0, Value: []byte("v"), Timestamp: old})
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	got := consume(t, ts, "lat", 1)
	if ts := got[0].Timestamp; ts.Before(before) || ts.After(time.Now().Add(time.Second)) || got[0].Attrs.TimestampType() != 1 {
		t.Fatalf("consumed timestamp %v type %d, want the append time (type 1)", ts, got[0].Attrs.TimestampType())
	}
}
