package kafka

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestListDescribeGroups: a kgo consumer group, once it consumes, is
// listed Stable with its protocol type and described with its member:
// client id, client host as Kafka writes it, the consumer protocol's
// metadata and assignment; a group with only committed offsets is listed
// and described Empty; an unknown group is described Dead with no error;
// v4's state filter and v3's authorized operations are honoured.
func TestListDescribeGroups(t *testing.T) {
	ts := startServer(t, Options{})
	admin := ts.client(t)
	ctx := ctxT(t)
	if err := createTopic(t, admin, "t", 1); err != nil {
		t.Fatal(err)
	}
	if err := admin.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	consume(t, ts, "t", 1, kgo.ConsumerGroup("live"), kgo.ClientID("the-consumer"))

	// A simple (memberless) commit creates a group that only has offsets.
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Group, oc.Generation = "offsets-only", -1
	ot := kmsg.NewOffsetCommitRequestTopic()
	ot.Topic = "t"
	op := kmsg.NewOffsetCommitRequestTopicPartition()
	op.Offset = 1
	ot.Partitions = append(ot.Partitions, op)
	oc.Topics = append(oc.Topics, ot)
	ocr, err := oc.RequestWith(ctx, admin)
	if err != nil || ocr.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("simple commit: %v %+v", err, ocr)
	}

	list := func(version int16, states ...string) []kmsg.ListGroupsResponseGroup {
		t.Helper()
		req := kmsg.NewPtrListGroupsRequest()
		req.Version, req.StatesFilter = version, states
		resp, err := req.RequestWith(ctx, admin)
		if err != nil || resp.ErrorCode != 0 {
			t.Fatalf("ListGroups v%d: %v %+v", version, err, resp)
		}
		return resp.Groups
	}
	want := []kmsg.ListGroupsResponseGroup{
		{Group: "live", ProtocolType: "consumer", GroupState: "Stable"},
		{Group: "offsets-only", ProtocolType: "", GroupState: "Empty"},
	}
	if got := list(4); !slices.EqualFunc(got, want, sameListing) {
		t.Fatalf("ListGroups v4 = %+v, want %+v", got, want)
	}
	if got := list(4, "empty"); !slices.EqualFunc(got, want[1:], sameListing) {
		t.Fatalf("ListGroups v4 filtered to empty = %+v, want %+v", got, want[1:])
	}
	// kgo sends its newest version: v0, which has no state, goes raw.
	lreq := kmsg.NewPtrListGroupsRequest()
	lreq.Version = 0
	l0 := dial(t, ts.addr).roundTrip(lreq).(*kmsg.ListGroupsResponse)
	if got := l0.Groups; l0.ErrorCode != 0 || len(got) != 2 || got[0].Group != "live" || got[1].Group != "offsets-only" || got[0].GroupState != "" {
		t.Fatalf("ListGroups v0 = %+v, want both groups without state", l0)
	}

	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Version, req.Groups, req.IncludeAuthorizedOperations = 5, []string{"live", "offsets-only", "unknown"}, true
	resp, err := req.RequestWith(ctx, admin)
	if err != nil || len(resp.Groups) != 3 {
		t.Fatalf("DescribeGroups: %v %+v", err, resp)
	}
	live, only, unknown := resp.Groups[0], resp.Groups[1], resp.Groups[2]
	if live.ErrorCode != 0 || live.Group != "live" || live.State != "Stable" || live.ProtocolType != "consumer" ||
		live.Protocol == "" || live.AuthorizedOperations != groupOperations || len(live.Members) != 1 {
		t.Fatalf("live group described as %+v", live)
	}
	m := live.Members[0]
	if m.ClientID != "the-consumer" || m.ClientHost != "/127.0.0.1" || m.InstanceID != nil {
		t.Fatalf("member described as id %q client %q host %q instance %v", m.MemberID, m.ClientID, m.ClientHost, m.InstanceID)
	}
	var meta kmsg.ConsumerMemberMetadata
	if err := meta.ReadFrom(m.ProtocolMetadata); err != nil || !slices.Equal(meta.Topics, []string{"t"}) {
		t.Fatalf("member metadata %x: %v, topics %v", m.ProtocolMetadata, err, meta.Topics)
	}
	var assign kmsg.ConsumerMemberAssignment
	if err := assign.ReadFrom(m.MemberAssignment); err != nil || len(assign.Topics) != 1 || assign.Topics[0].Topic != "t" {
		t.Fatalf("member assignment %x: %v, %+v", m.MemberAssignment, err, assign.Topics)
	}
	if only.ErrorCode != 0 || only.State != "Empty" || len(only.Members) != 0 {
		t.Fatalf("offsets-only group described as %+v", only)
	}
	if unknown.ErrorCode != 0 || unknown.State != "Dead" || unknown.ProtocolType != "" || len(unknown.Members) != 0 {
		t.Fatalf("unknown group described as %+v", unknown)
	}

	// Below v3 no authorized operations; without the ask, Kafka's "not
	// requested" (INT32_MIN).
	req.Version, req.Groups, req.IncludeAuthorizedOperations = 5, []string{"live"}, false
	if resp, err = req.RequestWith(ctx, admin); err != nil || resp.Groups[0].AuthorizedOperations != -1<<31 {
		t.Fatalf("DescribeGroups without the ask: %v, operations %d", err, resp.Groups[0].AuthorizedOperations)
	}
}

func sameListing(a, b kmsg.ListGroupsResponseGroup) bool {
	return a.Group == b.Group && a.ProtocolType == b.ProtocolType && a.GroupState == b.GroupState
}
