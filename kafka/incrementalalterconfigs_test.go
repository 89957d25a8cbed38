package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

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
