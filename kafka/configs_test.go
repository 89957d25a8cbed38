package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDescribeConfigs: a topic's overrides are dynamic topic configs
// (source 1), the rest the engine's defaults (source 5, IsDefault in v0);
// ConfigNames filters; synonyms name the broker default; an unknown topic
// is UNKNOWN_TOPIC_OR_PARTITION, another broker id INVALID_REQUEST; the
// broker shows the engine's defaults under broker names.
func TestDescribeConfigs(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopicWithConfig("t", 1, map[string]string{"retention.ms": "60000"}); err != nil {
		t.Fatal(err)
	}
	rc := dial(t, ts.addr)
	describe := func(version int16, synonyms bool, res ...kmsg.DescribeConfigsRequestResource) []kmsg.DescribeConfigsResponseResource {
		t.Helper()
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.Version, req.Resources, req.IncludeSynonyms = version, res, synonyms
		return rc.roundTrip(req).(*kmsg.DescribeConfigsResponse).Resources
	}
	resource := func(typ kmsg.ConfigResourceType, name string, names ...string) kmsg.DescribeConfigsRequestResource {
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName, r.ConfigNames = typ, name, names
		return r
	}
	byName := func(cs []kmsg.DescribeConfigsResponseResourceConfig) map[string]kmsg.DescribeConfigsResponseResourceConfig {
		m := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
		for _, c := range cs {
			m[c.Name] = c
		}
		return m
	}

	got := describe(4, true, resource(kmsg.ConfigResourceTypeTopic, "t"))
	if len(got) != 1 || got[0].ErrorCode != 0 || got[0].ResourceName != "t" {
		t.Fatalf("topic t: %+v", got)
	}
	cs := byName(got[0].Configs)
	ret, seg := cs["retention.ms"], cs["segment.bytes"]
	if ret.Value == nil || *ret.Value != "60000" || ret.Source != kmsg.ConfigSourceDynamicTopicConfig || ret.ReadOnly || ret.ConfigType != kmsg.ConfigTypeLong {
		t.Fatalf("retention.ms: %+v", ret)
	}
	if len(ret.ConfigSynonyms) != 2 || ret.ConfigSynonyms[1].Name != "log.retention.ms" || *ret.ConfigSynonyms[1].Value != "604800000" {
		t.Fatalf("retention.ms synonyms: %+v", ret.ConfigSynonyms)
	}
	if seg.Value == nil || *seg.Value != "1073741824" || seg.Source != kmsg.ConfigSourceDefaultConfig || seg.ReadOnly {
		t.Fatalf("segment.bytes: %+v", seg)
	}
	if c := cs["cleanup.policy"]; c.Value == nil || *c.Value != "delete" || c.ReadOnly || c.ConfigType != kmsg.ConfigTypeList {
		t.Fatalf("cleanup.policy: %+v", c)
	}

	// v0: IsDefault instead of the source; ConfigNames keeps those named.
	got = describe(0, false, resource(kmsg.ConfigResourceTypeTopic, "t", "retention.ms", "segment.bytes", "no.such.config"))
	cs = byName(got[0].Configs)
	if len(cs) != 2 || cs["retention.ms"].IsDefault || !cs["segment.bytes"].IsDefault {
		t.Fatalf("v0 with names: %+v", got[0].Configs)
	}

	got = describe(4, false,
		resource(kmsg.ConfigResourceTypeTopic, "missing"),
		resource(kmsg.ConfigResourceTypeBroker, "7"),
		resource(kmsg.ConfigResourceTypeBroker, "0", "log.retention.ms", "broker.id"),
		resource(kmsg.ConfigResourceTypeBrokerLogger, "0"))
	if got[0].ErrorCode != kerr.UnknownTopicOrPartition.Code || got[1].ErrorCode != kerr.InvalidRequest.Code ||
		got[2].ErrorCode != 0 || got[3].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("codes %d %d %d %d", got[0].ErrorCode, got[1].ErrorCode, got[2].ErrorCode, got[3].ErrorCode)
	}
	cs = byName(got[2].Configs)
	if len(cs) != 2 || *cs["log.retention.ms"].Value != "604800000" || *cs["broker.id"].Value != "0" {
		t.Fatalf("broker 0: %+v", got[2].Configs)
	}
}
