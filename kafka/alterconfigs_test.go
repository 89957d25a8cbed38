package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func strp(s string) *string { return &s }

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
