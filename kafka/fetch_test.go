package kafka

import (
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchReq builds a Fetch v12 for one topic's partitions, all from
// offset, with the given wait and minimum.
func fetchReq(topic string, parts []int32, offset int64, maxWait, minBytes int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 12, maxWait, minBytes, 50<<20
	req.SessionEpoch = -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	for _, p := range parts {
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = p, offset, 1<<20
		ft.Partitions = append(ft.Partitions, fp)
	}
	req.Topics = append(req.Topics, ft)
	return req
}

// TestFetchMinBytesAcrossSegments: a read returns one segment's
// batches, so a fetch whose offset lies in an older segment than the high
// watermark gets less than MinBytes although more is stored. Kafka's
// DelayedFetch.tryComplete completes such a fetch at once ("fetching older
// segments", case F); idemlog parks it until MaxWait, as nothing will
// advance the high watermark: a consumer with fetch.min.bytes stalls a full
// MaxWait at every segment boundary.
func TestFetchMinBytesAcrossSegments(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 1, map[string]string{"segment.bytes": "100"}); err != nil {
		t.Fatal(err)
	}
	p, _ := ts.eng.Partition("t", 0)
	total := 0
	for range 3 {
		b := buildBatch(t, -1, 0, 0, 2)
		total += len(b)
		if _, err := p.Append(b); err != nil {
			t.Fatal(err)
		}
	}
	rc := dial(t, ts.addr)
	const maxWait = 6000
	start := time.Now()
	resp := rc.roundTrip(fetchReq("t", []int32{0}, 0, maxWait, int32(total))).(*kmsg.FetchResponse)
	took := time.Since(start)
	rp := resp.Topics[0].Partitions[0]
	if rp.ErrorCode != 0 || rp.HighWatermark != 6 || len(rp.RecordBatches) == 0 {
		t.Fatalf("code %d, high watermark %d, %d bytes", rp.ErrorCode, rp.HighWatermark, len(rp.RecordBatches))
	}
	if took >= maxWait*time.Millisecond/2 {
		t.Fatalf("fetch of %d bytes (MinBytes %d, %d stored in later segments) took %v: parked until MaxWait %dms although the log holds MinBytes", len(rp.RecordBatches), total, total-len(rp.RecordBatches), took, maxWait)
	}
}

// TestFetchDeletedWhileParked: a fetch parked on a partition whose
// topic is then deleted wakes (the log closes) and reads a closed log. The
// read_uncommitted path calls partition.Log.Read directly, so the closed
// log's ErrClosed (UNKNOWN_SERVER_ERROR, not retriable) reaches the client;
// the read_committed path maps it (Partition.gone) to
// UNKNOWN_TOPIC_OR_PARTITION, which is what Kafka answers for a partition
// deleted under a DelayedFetch.
func TestFetchDeletedWhileParked(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	rc := dial(t, ts.addr)
	rc.send(fetchReq("t", []int32{0}, 0, 8000, 1))
	// Let the fetch park (the wait is 8 s; deleting before it parks gives
	// UNKNOWN_TOPIC_OR_PARTITION from the lookup, also the right answer).
	time.Sleep(500 * time.Millisecond)
	if err := ts.eng.DeleteTopic("t"); err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 12
	rc.recv(resp)
	if c := resp.Topics[0].Partitions[0].ErrorCode; c != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("fetch parked on a deleted partition: code %d (%v), want UNKNOWN_TOPIC_OR_PARTITION (3)", c, kerr.ErrorForCode(c))
	}
}

// TestFetchCurrentLeaderEpochAhead: Metadata advertises leader
// epoch 0. A Fetch (v9+) or ListOffsets (v4+) carrying a current leader
// epoch above the partition's must get UNKNOWN_LEADER_EPOCH (Kafka's
// Partition.localLogWithEpochOrThrow); idemlog ignores the field and
// serves the read.
func TestFetchCurrentLeaderEpochAhead(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	p, _ := ts.eng.Partition("t", 0)
	if _, err := p.Append(buildBatch(t, -1, 0, 0, 2)); err != nil {
		t.Fatal(err)
	}
	rc := dial(t, ts.addr)
	fr := fetchReq("t", []int32{0}, 0, 0, 0)
	fr.Topics[0].Partitions[0].CurrentLeaderEpoch = 5
	fp := rc.roundTrip(fr).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	lr := kmsg.NewPtrListOffsetsRequest()
	lr.Version = 6
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "t"
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Partition, lp.Timestamp, lp.CurrentLeaderEpoch = 0, -1, 5
	lt.Partitions = append(lt.Partitions, lp)
	lr.Topics = append(lr.Topics, lt)
	lo := rc.roundTrip(lr).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	if fp.ErrorCode != kerr.UnknownLeaderEpoch.Code || lo.ErrorCode != kerr.UnknownLeaderEpoch.Code {
		t.Fatalf("current leader epoch 5 against epoch 0: Fetch code %d (%d bytes), ListOffsets code %d (offset %d); want UNKNOWN_LEADER_EPOCH (75) for both",
			fp.ErrorCode, len(fp.RecordBatches), lo.ErrorCode, lo.Offset)
	}
}

// TestFetchSessionIDZeroIncrementalEpoch: KIP-227's metadata is a
// full fetch only with epoch 0 (INITIAL) or -1 (FINAL); any other epoch is
// incremental and names a session, and session id 0 names none, so Kafka
// (FetchManager.newContext) answers FETCH_SESSION_ID_NOT_FOUND. idemlog
// checks the id and a positive epoch separately and serves (0, 1) and
// (id, -2) as full fetches.
func TestFetchSessionIDZeroIncrementalEpoch(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	rc := dial(t, ts.addr)
	for _, c := range []struct{ id, epoch int32 }{{0, 1}, {7, -2}} {
		fr := fetchReq("t", []int32{0}, 0, 0, 0)
		fr.SessionID, fr.SessionEpoch = c.id, c.epoch
		resp := rc.roundTrip(fr).(*kmsg.FetchResponse)
		if resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
			t.Errorf("session id %d epoch %d: code %d, want FETCH_SESSION_ID_NOT_FOUND (70)", c.id, c.epoch, resp.ErrorCode)
		}
	}
}

// TestFetchMaxBytesZero: Kafka caps a fetch at min(MaxBytes,
// fetch.max.bytes) with only the first batch exempt (KIP-74): MaxBytes 0
// returns exactly one batch. idemlog treats MaxBytes <= 0 as unlimited.
func TestFetchMaxBytesZero(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 2); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		p, _ := ts.eng.Partition("t", i)
		for range 2 {
			if _, err := p.Append(buildBatch(t, -1, 0, 0, 2)); err != nil {
				t.Fatal(err)
			}
		}
	}
	rc := dial(t, ts.addr)
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxBytes, req.MaxWaitMillis = 11, 0, 0
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "t"
	for i := range int32(2) {
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.PartitionMaxBytes = i, 1<<20
		ft.Partitions = append(ft.Partitions, fp)
	}
	req.Topics = append(req.Topics, ft)
	resp := rc.roundTrip(req).(*kmsg.FetchResponse)
	batches := 0
	for _, p := range resp.Topics[0].Partitions {
		for data := p.RecordBatches; len(data) > 0; {
			n, err := batch.Size(data)
			if err != nil {
				t.Fatal(err)
			}
			data = data[n:]
			batches++
		}
	}
	if batches != 1 {
		t.Fatalf("fetch with MaxBytes 0 returned %d batches, want 1", batches)
	}
}
