package kafka

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// holdMutations takes the turn of topic mutations, as a long one (an
// alteration of a 65,536-partition topic) holds the engine, and returns
// its release.
func holdMutations(t *testing.T, ts *testServer) (release func()) {
	t.Helper()
	ts.srv.mutations <- struct{}{}
	released := false
	release = func() {
		if !released {
			released = true
			<-ts.srv.mutations
		}
	}
	t.Cleanup(release)
	return release
}

func retentionAlter(topic, ms string) *kmsg.AlterConfigsRequest {
	req := kmsg.NewPtrAlterConfigsRequest()
	res := kmsg.NewAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	c := kmsg.NewAlterConfigsRequestResourceConfig()
	c.Name, c.Value = "retention.ms", kmsg.StringPtr(ms)
	res.Configs = append(res.Configs, c)
	req.Resources = append(req.Resources, res)
	return req
}

func retentionOf(t *testing.T, ts *testServer, topic string) string {
	t.Helper()
	entries, err := ts.eng.Frontend().TopicConfig(topic)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name == "retention.ms" {
			return e.Value
		}
	}
	t.Fatalf("topic %s has no retention.ms", topic)
	return ""
}

// An AlterConfigs behind a long topic mutation waits at most the request
// timeout, then is answered REQUEST_TIMED_OUT and changes nothing; once the
// engine is free the same request succeeds. Without the bound it waited on
// the engine's lock for as long as the other mutation ran (minutes for a
// wide topic), holding its connection, which piled connections up to
// max.connections in the soak.
func TestTopicMutationWaitEndsAtRequestTimeout(t *testing.T) {
	const requestTimeout = 300 * time.Millisecond
	ts := startServer(t, Options{RequestTimeout: requestTimeout})
	if err := ts.eng.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	before := retentionOf(t, ts, "t")
	release := holdMutations(t, ts)
	rc := dial(t, ts.addr)
	start := time.Now()
	resp := rc.roundTrip(retentionAlter("t", "600000")).(*kmsg.AlterConfigsResponse)
	took := time.Since(start)
	if code := resp.Resources[0].ErrorCode; code != kerr.RequestTimedOut.Code {
		t.Fatalf("AlterConfigs behind a running mutation: code %d (%v), want REQUEST_TIMED_OUT", code, kerr.ErrorForCode(code))
	}
	if took < requestTimeout || took > requestTimeout+2*time.Second {
		t.Fatalf("answered after %v, want about the request timeout %v", took, requestTimeout)
	}
	if got := retentionOf(t, ts, "t"); got != before {
		t.Fatalf("retention.ms %s after a timed-out alteration, want %s unchanged", got, before)
	}
	release()
	resp = rc.roundTrip(retentionAlter("t", "600000")).(*kmsg.AlterConfigsResponse)
	if code := resp.Resources[0].ErrorCode; code != 0 {
		t.Fatalf("AlterConfigs once the engine is free: code %d (%v)", code, kerr.ErrorForCode(code))
	}
	if got := retentionOf(t, ts, "t"); got != "600000" {
		t.Fatalf("retention.ms %s, want 600000", got)
	}
}

// A CreateTopics waiting for its turn ends when its client disconnects:
// the server lets the connection go at once, not when the request timeout
// (30 s here) or the running mutation ends, and the topic is not created
// later on the departed client's behalf.
func TestTopicMutationWaitEndsWhenClientDisconnects(t *testing.T) {
	ts := startServer(t, Options{})
	release := holdMutations(t, ts)
	rc := dial(t, ts.addr)
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "left", 1, 1
	req.Topics = append(req.Topics, rt)
	rc.send(req)
	time.Sleep(200 * time.Millisecond) // waiting for its turn by now
	if n := openConns(ts); n != 1 {
		t.Fatalf("server holds %d connections, want 1", n)
	}
	rc.c.Close()
	if !awaitOpenConns(ts, 0, 2*time.Second) {
		t.Fatal("the server still holds the connection 2s after its client disconnected while its CreateTopics waited")
	}
	release()
	time.Sleep(100 * time.Millisecond)
	if _, ok := ts.eng.Topics()["left"]; ok {
		t.Fatal("the departed client's topic was created once the engine was free")
	}
}

// Requests that cannot change topics do not wait for the turn: Metadata
// without auto-creation and DescribeConfigs are answered while a mutation
// runs.
func TestReadsDoNotWaitForTopicMutations(t *testing.T) {
	ts := startServer(t, Options{RequestTimeout: 10 * time.Second})
	if err := ts.eng.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	holdMutations(t, ts)
	rc := dial(t, ts.addr)
	start := time.Now()
	md := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("t")
	md.Topics = append(md.Topics, mt)
	if resp := rc.roundTrip(md).(*kmsg.MetadataResponse); resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("Metadata: code %d", resp.Topics[0].ErrorCode)
	}
	dc := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
	dc.Resources = append(dc.Resources, res)
	if resp := rc.roundTrip(dc).(*kmsg.DescribeConfigsResponse); resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("DescribeConfigs: code %d", resp.Resources[0].ErrorCode)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("reads answered after %v while a mutation ran", took)
	}
}
