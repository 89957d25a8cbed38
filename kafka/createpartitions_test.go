package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestCreatePartitions: the count rises (engine.TestAddPartitions checks
// the new partitions' configs); not above the current count INVALID_PARTITIONS; an
// unknown topic UNKNOWN_TOPIC_OR_PARTITION; an assignment to another node
// INVALID_REPLICA_ASSIGNMENT; a topic named twice INVALID_REQUEST; an
// internal topic refused; ValidateOnly changes nothing.
func TestCreatePartitions(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 1, map[string]string{"retention.ms": "60000"}); err != nil {
		t.Fatal(err)
	}
	if err := ts.eng.CreateTopic("u", 1); err != nil {
		t.Fatal(err)
	}
	rc := dial(t, ts.addr)
	create := func(validate bool, topics ...kmsg.CreatePartitionsRequestTopic) map[string]int16 {
		t.Helper()
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.Topics, req.ValidateOnly = topics, validate
		out := map[string]int16{}
		for _, rt := range rc.roundTrip(req).(*kmsg.CreatePartitionsResponse).Topics {
			out[rt.Topic] = rt.ErrorCode
		}
		return out
	}
	topic := func(name string, count int32, nodes ...int32) kmsg.CreatePartitionsRequestTopic {
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = name, count
		for _, n := range nodes {
			a := kmsg.NewCreatePartitionsRequestTopicAssignment()
			a.Replicas = []int32{n}
			rt.Assignment = append(rt.Assignment, a)
		}
		return rt
	}
	if codes := create(true, topic("t", 3)); codes["t"] != 0 || ts.eng.Topics()["t"] != 1 {
		t.Fatalf("validate only: %v, %d partitions", codes, ts.eng.Topics()["t"])
	}
	codes := create(false, topic("t", 3, 0, 0), topic("u", 1), topic("nope", 2), topic("__consumer_offsets", 60))
	if codes["t"] != 0 || codes["u"] != kerr.InvalidPartitions.Code || codes["nope"] != kerr.UnknownTopicOrPartition.Code ||
		codes["__consumer_offsets"] == 0 {
		t.Fatalf("codes %v", codes)
	}
	if n := ts.eng.Topics()["t"]; n != 3 {
		t.Fatalf("t has %d partitions, want 3", n)
	}
	if _, err := ts.eng.Partition("t", 2); err != nil {
		t.Fatal(err)
	}
	if codes := create(false, topic("u", 2, 5)); codes["u"] != kerr.InvalidReplicaAssignment.Code {
		t.Fatalf("assignment to node 5: %v", codes)
	}
	if codes := create(false, topic("u", 2), topic("u", 3)); codes["u"] != kerr.InvalidRequest.Code || ts.eng.Topics()["u"] != 1 {
		t.Fatalf("duplicate: %v, %d partitions", codes, ts.eng.Topics()["u"])
	}
}

func createPartitionsReq(t *testing.T, rc *rawConn, validate bool, topic string, count int32) int16 {
	t.Helper()
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.Version, req.ValidateOnly = 3, validate
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = topic, count
	req.Topics = append(req.Topics, rt)
	return rc.roundTrip(req).(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode
}

// TestCreatePartitionsValidateOnlyLimit: ValidateOnly must answer
// what the same request would get (Kafka runs every check of the real
// request and stops before applying it). Above engine.AddPartitions'
// limit (1<<20 partitions) the real request is INVALID_PARTITIONS, but
// ValidateOnly says it would succeed: the count limit is only checked in
// the engine.
func TestCreatePartitionsValidateOnlyLimit(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	rc := dial(t, ts.addr)
	const count = 1<<20 + 1
	real := createPartitionsReq(t, rc, false, "t", count)
	if real != kerr.InvalidPartitions.Code {
		t.Fatalf("CreatePartitions(t, %d): code %d, want INVALID_PARTITIONS", count, real)
	}
	if v := createPartitionsReq(t, rc, true, "t", count); v != real {
		t.Fatalf("CreatePartitions(t, %d) ValidateOnly: code %d, the real request's is %d (INVALID_PARTITIONS)", count, v, real)
	}
}
