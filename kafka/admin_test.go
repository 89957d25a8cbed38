package kafka

import (
	"encoding/binary"
	"log/slog"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDeleteRecords: the log start moves to the offset asked (-1: the high
// watermark) and the answer is the new low watermark; above the high
// watermark OFFSET_OUT_OF_RANGE, an unknown partition
// UNKNOWN_TOPIC_OR_PARTITION, an internal topic INVALID_TOPIC_EXCEPTION,
// each with low watermark -1; a read below the new start is out of range.
func TestDeleteRecords(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 2); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.eng.Frontend().OffsetGroups(); err != nil { // creates __consumer_offsets
		t.Fatal(err)
	}
	rc := dial(t, ts.addr)
	for p := int32(0); p < 2; p++ {
		if codes := produceCodes(t, rc, produceReq("t", map[int32][]byte{p: buildBatch(t, -1, 0, 0, 5)})); codes[p] != 0 {
			t.Fatalf("produce: %v", codes)
		}
	}
	req := kmsg.NewPtrDeleteRecordsRequest()
	add := func(topic string, offsets map[int32]int64) {
		rt := kmsg.NewDeleteRecordsRequestTopic()
		rt.Topic = topic
		for p, off := range offsets {
			rp := kmsg.NewDeleteRecordsRequestTopicPartition()
			rp.Partition, rp.Offset = p, off
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	add("t", map[int32]int64{0: 3})
	add("t", map[int32]int64{1: -1})
	add("t", map[int32]int64{7: 1})
	add("__consumer_offsets", map[int32]int64{0: 0})
	resp := rc.roundTrip(req).(*kmsg.DeleteRecordsResponse)
	got := map[string][2]int64{}
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			got[rt.Topic+"/"+string(rune('0'+p.Partition))] = [2]int64{int64(p.ErrorCode), p.LowWatermark}
		}
	}
	want := map[string][2]int64{
		"t/0":                  {0, 3},
		"t/1":                  {0, 5},
		"t/7":                  {int64(kerr.UnknownTopicOrPartition.Code), -1},
		"__consumer_offsets/0": {int64(kerr.InvalidTopicException.Code), -1},
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: code, low watermark = %v, want %v", k, got[k], w)
		}
	}
	p0, _ := ts.eng.Partition("t", 0)
	if s := p0.LogStartOffset(); s != 3 {
		t.Fatalf("log start %d, want 3", s)
	}
	req = kmsg.NewPtrDeleteRecordsRequest()
	add("t", map[int32]int64{0: 6})
	resp = rc.roundTrip(req).(*kmsg.DeleteRecordsResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.OffsetOutOfRange.Code || p.LowWatermark != -1 {
		t.Fatalf("delete above the high watermark: code %d, low %d", p.ErrorCode, p.LowWatermark)
	}
}

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

func quietServer(t *testing.T, opts Options) *testServer {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return startServer(t, opts)
}

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

// Kafka validates ApiVersions v3+ client software name and version
// (ApiVersionsRequest.isValid) and answers INVALID_REQUEST (42).
func TestApiVersionsInvalidSoftwareName(t *testing.T) {
	ts := quietServer(t, Options{})
	rc := dial(t, ts.addr)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "", "!!"
	resp := rc.roundTrip(req).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("code %d, want INVALID_REQUEST (42)", resp.ErrorCode)
	}
}

// A frame's size prefix alone (4 bytes) makes the server allocate the
// whole claimed frame before any of it arrives: a few idle connections
// pin gigabytes.
func TestFramePrefixAllocatesUpfront(t *testing.T) {
	ts := quietServer(t, Options{})
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	const conns = 16
	for range conns {
		c, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write(binary.BigEndian.AppendUint32(nil, 100<<20)) // and nothing else
	}
	time.Sleep(500 * time.Millisecond)
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("heap grew by %d MiB for %d connections that sent 4 bytes each", grew>>20, conns)
	if grew > 256<<20 {
		t.Errorf("heap grew by %d MiB from %d bytes of input", grew>>20, conns*4)
	}
}

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

func TestNoGoroutineLeak(t *testing.T) {
	ts := quietServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	// warm up
	rc := dial(t, ts.addr)
	rc.roundTrip(kmsg.NewPtrMetadataRequest())
	rc.c.Close()
	time.Sleep(200 * time.Millisecond)
	base := runtime.NumGoroutine()
	for range 50 {
		c, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		rc := &rawConn{t: t, c: c}
		for range 20 {
			m := kmsg.NewPtrMetadataRequest()
			m.Version = 9
			rc.send(m)
		}
		f := kmsg.NewPtrFetchRequest()
		f.Version, f.MaxWaitMillis, f.MinBytes, f.MaxBytes = 11, 500, 1, 1<<20
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = "t"
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes = 1 << 20
		ft.Partitions = append(ft.Partitions, fp)
		f.Topics = append(f.Topics, ft)
		rc.send(f)
		c.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base+2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base+2 {
		buf := make([]byte, 1<<20)
		t.Errorf("goroutines %d, was %d\n%s", n, base, buf[:runtime.Stack(buf, true)])
	}
}

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
