package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Connections that come and go (with pipelined requests unanswered) leave
// no goroutines behind.
// Kafka answers one entry per distinct topic in Metadata (the request's
// topics are a set); here a repeated name is answered twice.
func TestMetadataDuplicateTopics(t *testing.T) {
	ts := quietServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	rc := dial(t, ts.addr)
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 9
	for range 2 {
		rt := kmsg.NewMetadataRequestTopic()
		name := "t"
		rt.Topic = &name
		req.Topics = append(req.Topics, rt)
	}
	resp := rc.roundTrip(req).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 {
		t.Errorf("%d topic entries for one distinct topic, want 1", len(resp.Topics))
	}
}

// Metadata's auto-creation follows CreateTopics' rule: "a.b" collides with
// an existing "a_b" and is refused (INVALID_TOPIC_EXCEPTION), not created
// beside it; an existing topic is answered as it is.
func TestAutoCreateCollision(t *testing.T) {
	ts := startServer(t, Options{AutoCreateTopics: true})
	if err := ts.eng.CreateTopic("a_b", 2); err != nil {
		t.Fatal(err)
	}
	rc := dial(t, ts.addr)
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 9
	req.AllowAutoTopicCreation = true
	for _, name := range []string{"a.b", "a_b", "fresh"} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	resp := rc.roundTrip(req).(*kmsg.MetadataResponse)
	got := map[string]kmsg.MetadataResponseTopic{}
	for _, tp := range resp.Topics {
		got[*tp.Topic] = tp
	}
	if c := got["a.b"].ErrorCode; c != 17 {
		t.Errorf("a.b: error %d, want 17 (collides with a_b)", c)
	}
	if tp := got["a_b"]; tp.ErrorCode != 0 || len(tp.Partitions) != 2 {
		t.Errorf("a_b: error %d, %d partitions; want 0 and 2", tp.ErrorCode, len(tp.Partitions))
	}
	if tp := got["fresh"]; tp.ErrorCode != 0 || len(tp.Partitions) != 1 {
		t.Errorf("fresh: error %d, %d partitions; want auto-created with 1", tp.ErrorCode, len(tp.Partitions))
	}
	if _, ok := ts.eng.Topics()["a.b"]; ok {
		t.Error("a.b was created beside a_b")
	}
}
