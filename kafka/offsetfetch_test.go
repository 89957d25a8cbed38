package kafka

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestOffsetFetchAllRequireStablePlacement: OffsetFetch for all of a
// group's partitions with RequireStable. Kafka never fails the group for a
// pending transactional commit: the 3.x GroupMetadataManager.getOffsets
// ignores requireStable for "all" (UNSTABLE_OFFSET_COMMIT only per
// requested partition), and the 4.x GroupCoordinatorService.fetchAllOffsets
// waits for pending writes instead of returning 88. idemlog puts
// UNSTABLE_OFFSET_COMMIT on the whole group and returns no offsets, so the
// stable partition's offset is lost too.
func TestOffsetFetchAllRequireStablePlacement(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 2); err != nil {
		t.Fatal(err)
	}
	rc := dial(t, ts.addr)
	// A plain commit for t-1.
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Version, oc.Group, oc.Generation = 7, "g", -1
	ot := kmsg.NewOffsetCommitRequestTopic()
	ot.Topic = "t"
	op := kmsg.NewOffsetCommitRequestTopicPartition()
	op.Partition, op.Offset = 1, 7
	ot.Partitions = append(ot.Partitions, op)
	oc.Topics = append(oc.Topics, ot)
	if c := rc.roundTrip(oc).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; c != 0 {
		t.Fatalf("commit: %d", c)
	}
	// A pending transactional commit for t-0.
	id := "tx"
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.TransactionalID, ip.TransactionTimeoutMillis = &id, 60000
	ipr := rc.roundTrip(ip).(*kmsg.InitProducerIDResponse)
	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch, ao.Group = id, ipr.ProducerID, ipr.ProducerEpoch, "g"
	if c := rc.roundTrip(ao).(*kmsg.AddOffsetsToTxnResponse).ErrorCode; c != 0 {
		t.Fatal(c)
	}
	tc := kmsg.NewPtrTxnOffsetCommitRequest()
	tc.Version = 2
	tc.TransactionalID, tc.Group, tc.ProducerID, tc.ProducerEpoch = id, "g", ipr.ProducerID, ipr.ProducerEpoch
	tt := kmsg.NewTxnOffsetCommitRequestTopic()
	tt.Topic = "t"
	tp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	tp.Partition, tp.Offset = 0, 5
	tt.Partitions = append(tt.Partitions, tp)
	tc.Topics = append(tc.Topics, tt)
	if c := rc.roundTrip(tc).(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; c != 0 {
		t.Fatal(c)
	}
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Version, of.RequireStable = 8, true
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = "g" // Topics nil: all partitions
	of.Groups = append(of.Groups, g)
	resp := rc.roundTrip(of).(*kmsg.OffsetFetchResponse)
	rg := resp.Groups[0]
	var got []string
	for _, rt := range rg.Topics {
		for _, p := range rt.Partitions {
			got = append(got, fmt.Sprintf("%s-%d:%d/%d", rt.Topic, p.Partition, p.Offset, p.ErrorCode))
		}
	}
	if rg.ErrorCode != 0 {
		t.Fatalf("OffsetFetch(all, requireStable): group error %d, partitions %v; want group error 0 and t-1 offset 7 (any UNSTABLE_OFFSET_COMMIT per partition)", rg.ErrorCode, got)
	}
}

// TestOffsetFetchEmptyGroupID: Kafka serves OffsetFetch for the
// empty group id "for backwards compatibility" (GroupCoordinatorService
// fetchOffsets rejects only a null id; GroupCoordinator.isValidGroupId in
// 3.x allows "" for OFFSET_COMMIT/OFFSET_FETCH): the partition gets offset
// -1 and no error. idemlog answers INVALID_GROUP_ID, and at v1 (no
// top-level error field) an empty topic list.
func TestOffsetFetchEmptyGroupID(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	rc := dial(t, ts.addr)
	for _, v := range []int16{1, 5} {
		of := kmsg.NewPtrOffsetFetchRequest()
		of.Version, of.Group = v, ""
		ft := kmsg.NewOffsetFetchRequestTopic()
		ft.Topic, ft.Partitions = "t", []int32{0}
		of.Topics = append(of.Topics, ft)
		resp := rc.roundTrip(of).(*kmsg.OffsetFetchResponse)
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].Offset != -1 {
			t.Errorf("v%d OffsetFetch for group \"\": error %d, topics %+v; want t-0 offset -1, no error", v, resp.ErrorCode, resp.Topics)
		}
	}
}
