package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka (ControllerApis.deleteTopics): a name given twice gets
// INVALID_REQUEST ("Duplicate topic name."), an entry with neither name
// nor id gets INVALID_REQUEST, and an entry with both a name and an id
// gets INVALID_REQUEST ("You may not specify both topic name and topic
// id.") and deletes nothing. Here the id is ignored and the named topic
// is deleted even when the id is another topic's.
func TestDeleteTopicsInvalidEntries(t *testing.T) {
	ts := quietServer(t, Options{})
	for _, tp := range []string{"a", "b", "d"} {
		if err := ts.eng.CreateTopic(tp, 1); err != nil {
			t.Fatal(err)
		}
	}
	idB, _ := ts.eng.Frontend().TopicID("b")
	rc := dial(t, ts.addr)
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Version = 6
	add := func(name *string, id [16]byte) {
		dt := kmsg.NewDeleteTopicsRequestTopic()
		dt.Topic, dt.TopicID = name, id
		req.Topics = append(req.Topics, dt)
	}
	a, d := "a", "d"
	add(&a, idB)         // both name and id (and the id is b's)
	add(nil, [16]byte{}) // neither
	add(&d, [16]byte{})  // duplicate
	add(&d, [16]byte{})
	resp := rc.roundTrip(req).(*kmsg.DeleteTopicsResponse)
	for i, tp := range resp.Topics {
		if tp.ErrorCode != kerr.InvalidRequest.Code {
			name := "<nil>"
			if tp.Topic != nil {
				name = *tp.Topic
			}
			t.Errorf("entry %d (%s): code %d, want INVALID_REQUEST (42)", i, name, tp.ErrorCode)
		}
	}
	if _, ok := ts.eng.Topics()["a"]; !ok {
		t.Errorf("topic a deleted by an entry that named a but carried b's id")
	}
}
