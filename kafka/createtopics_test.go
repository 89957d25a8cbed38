package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func ctTopic(name string, parts int32, rf int16) kmsg.CreateTopicsRequestTopic {
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, parts, rf
	return rt
}

// Kafka (ControllerApis.createTopics) answers INVALID_REQUEST for every
// entry of a name given twice in one CreateTopics request, and creates
// nothing for it. Here the second entry silently adds partitions.
func TestCreateTopicsDuplicateName(t *testing.T) {
	ts := quietServer(t, Options{})
	rc := dial(t, ts.addr)
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 5
	req.TimeoutMillis = 5000
	req.Topics = append(req.Topics, ctTopic("dup", 1, 1), ctTopic("dup", 3, 1))
	resp := rc.roundTrip(req).(*kmsg.CreateTopicsResponse)
	for i, tp := range resp.Topics {
		if tp.ErrorCode != kerr.InvalidRequest.Code {
			t.Errorf("entry %d: code %d, want INVALID_REQUEST (42)", i, tp.ErrorCode)
		}
	}
	if n, ok := ts.eng.Topics()["dup"]; ok {
		t.Errorf("topic created with %d partitions from a request naming it twice", n)
	}
}

// Concurrent CreateTopics for one new topic on separate connections:
// Kafka gives exactly one success and TOPIC_ALREADY_EXISTS (36) to the rest,
// and the topic keeps the winner's partition count. The handler's
// existence check is a snapshot taken before the create, and the engine's
// create adds missing partitions to an existing topic.
func TestCreateTopicsConcurrentSameName(t *testing.T) {
	ts := quietServer(t, Options{})
	const n = 8
	conns := make([]*rawConn, n)
	for i := range conns {
		conns[i] = dial(t, ts.addr)
	}
	codes := make(chan int16, n)
	start := make(chan struct{})
	for i, rc := range conns {
		go func() {
			req := kmsg.NewPtrCreateTopicsRequest()
			req.Version = 5
			req.Topics = append(req.Topics, ctTopic("race", int32(i+1), 1))
			<-start
			rc.send(req)
			resp := req.ResponseKind()
			rc.recv(resp)
			codes <- resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode
		}()
	}
	close(start)
	ok := 0
	for range n {
		if <-codes == 0 {
			ok++
		}
	}
	if ok != 1 {
		t.Errorf("%d of %d concurrent creates of one topic succeeded, want 1; topic has %d partitions", ok, n, ts.eng.Topics()["race"])
	}
}

// Kafka rejects a topic whose name collides with an existing one once '.'
// and '_' are treated alike (Topic.hasCollision): INVALID_TOPIC_EXCEPTION.
func TestCreateTopicsCollision(t *testing.T) {
	ts := quietServer(t, Options{})
	rc := dial(t, ts.addr)
	for i, name := range []string{"a.b", "a_b"} {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version = 5
		req.Topics = append(req.Topics, ctTopic(name, 1, 1))
		resp := rc.roundTrip(req).(*kmsg.CreateTopicsResponse)
		want := int16(0)
		if i == 1 {
			want = kerr.InvalidTopicException.Code
		}
		if got := resp.Topics[0].ErrorCode; got != want {
			t.Errorf("%s: code %d, want %d", name, got, want)
		}
	}
}

// Kafka: replica assignments together with NumPartitions or
// ReplicationFactor other than -1 is INVALID_REQUEST (42); a manual
// assignment to the only broker (node 0) with both -1 is valid.
func TestCreateTopicsReplicaAssignment(t *testing.T) {
	ts := quietServer(t, Options{})
	rc := dial(t, ts.addr)
	mk := func(name string, parts int32, rf int16) kmsg.CreateTopicsRequestTopic {
		rt := ctTopic(name, parts, rf)
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = 0, []int32{0}
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
		return rt
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 5
	req.Topics = append(req.Topics, mk("both", 1, 1), mk("manual", -1, -1))
	resp := rc.roundTrip(req).(*kmsg.CreateTopicsResponse)
	if got := resp.Topics[0].ErrorCode; got != kerr.InvalidRequest.Code {
		t.Errorf("assignment + counts: code %d, want INVALID_REQUEST (42)", got)
	}
	if got := resp.Topics[1].ErrorCode; got != 0 {
		t.Errorf("manual assignment to node 0: code %d, want 0", got)
	}
}

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
