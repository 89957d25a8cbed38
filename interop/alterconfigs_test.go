package interop

import (
	"testing"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
)

func ptr(s string) *string { return &s }

// TestAlterConfigsKadm: franz-go's kadm creates a topic with the configs
// Kafka Streams and Connect set, alters them incrementally and reads them
// back; a bad value comes back as the broker's message.
func TestAlterConfigsKadm(t *testing.T) {
	_, addr := saramaServer(t)
	adm := kadmClient(t, addr)
	ctx := adminCtx(t)
	if _, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{
		"cleanup.policy": ptr("compact"), "message.timestamp.type": ptr("CreateTime"),
		"min.insync.replicas": ptr("1"), "compression.type": ptr("producer"),
	}, "changelog"); err != nil {
		t.Fatal(err)
	}
	resp, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "retention.ms", Value: ptr("3600000")},
		{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: ptr("delete")},
	}, "changelog")
	if err != nil || resp[0].Err != nil {
		t.Fatalf("alter: %v %+v", err, resp)
	}
	rc, err := adm.DescribeTopicConfigs(ctx, "changelog")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range rc[0].Configs {
		got[c.Key] = c.MaybeValue()
	}
	if got["retention.ms"] != "3600000" || got["cleanup.policy"] != "compact,delete" || got["min.insync.replicas"] != "1" {
		t.Fatalf("described: retention.ms %q cleanup.policy %q min.insync.replicas %q", got["retention.ms"], got["cleanup.policy"], got["min.insync.replicas"])
	}
	resp, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "segment.bytes", Value: ptr("1")}}, "changelog")
	if err != nil || resp[0].Err == nil || resp[0].ErrMessage != "Invalid value 1 for configuration segment.bytes: Value must be at least 14" {
		t.Fatalf("bad value: %v %+v", err, resp)
	}
}

// TestAlterConfigsSarama: sarama's ClusterAdmin alters a topic's configs,
// both the legacy way (a full replacement) and incrementally.
func TestAlterConfigsSarama(t *testing.T) {
	_, addr := saramaServer(t)
	c := saramaConfig()
	c.Version = sarama.V3_0_0_0
	adm, err := sarama.NewClusterAdmin([]string{addr}, c)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	if err := adm.CreateTopic("s", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1,
		ConfigEntries: map[string]*string{"retention.ms": ptr("60000")}}, false); err != nil {
		t.Fatal(err)
	}
	if err := adm.AlterConfig(sarama.TopicResource, "s", map[string]*string{"segment.ms": ptr("7200000")}, false); err != nil {
		t.Fatal(err)
	}
	if err := adm.IncrementalAlterConfig(sarama.TopicResource, "s", map[string]sarama.IncrementalAlterConfigsEntry{
		"max.message.bytes": {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: ptr("2000")},
	}, false); err != nil {
		t.Fatal(err)
	}
	res, err := adm.DescribeConfigs([]*sarama.ConfigResource{{Type: sarama.TopicResource, Name: "s"}}, sarama.DescribeConfigsOptions{})
	if err != nil || len(res) != 1 || res[0].ErrorCode != 0 {
		t.Fatalf("describe: %v %+v", err, res)
	}
	got := map[string]sarama.ConfigEntry{}
	for _, e := range res[0].Configs {
		got[e.Name] = e
	}
	if got["segment.ms"].Value != "7200000" || got["max.message.bytes"].Value != "2000" ||
		got["retention.ms"].Value != "604800000" || got["retention.ms"].Source == sarama.SourceTopic {
		t.Fatalf("described: segment.ms %+v max.message.bytes %+v retention.ms %+v", got["segment.ms"], got["max.message.bytes"], got["retention.ms"])
	}
}
