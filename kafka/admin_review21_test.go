package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func review21CreatePartitions(t *testing.T, rc *rawConn, validate bool, topic string, count int32) int16 {
	t.Helper()
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.Version, req.ValidateOnly = 3, validate
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = topic, count
	req.Topics = append(req.Topics, rt)
	return rc.roundTrip(req).(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode
}

// TestReview21CreatePartitionsValidateOnlyLimit: ValidateOnly must answer
// what the same request would get (Kafka runs every check of the real
// request and stops before applying it). Above engine.AddPartitions'
// limit (1<<20 partitions) the real request is INVALID_PARTITIONS, but
// ValidateOnly says it would succeed: the count limit is only checked in
// the engine.
func TestReview21CreatePartitionsValidateOnlyLimit(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	rc := dial(t, ts.addr)
	const count = 1<<20 + 1
	real := review21CreatePartitions(t, rc, false, "t", count)
	if real != kerr.InvalidPartitions.Code {
		t.Fatalf("CreatePartitions(t, %d): code %d, want INVALID_PARTITIONS", count, real)
	}
	if v := review21CreatePartitions(t, rc, true, "t", count); v != real {
		t.Fatalf("CreatePartitions(t, %d) ValidateOnly: code %d, the real request's is %d (INVALID_PARTITIONS)", count, v, real)
	}
}
