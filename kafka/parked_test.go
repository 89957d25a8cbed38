package kafka

import (
	"math"
	"testing"
	"time"

	"github.com/idemlog/idemlog/kafka/group"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// openConns is how many connections the server holds (each with its
// descriptor and goroutines).
func openConns(ts *testServer) int {
	ts.srv.mu.Lock()
	defer ts.srv.mu.Unlock()
	return len(ts.srv.conns)
}

// awaitOpenConns waits up to within for the server to hold want
// connections and reports whether it did.
func awaitOpenConns(ts *testServer, want int, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for openConns(ts) != want {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// longFetch is a Fetch of partition 0 of topic from offset 0 that waits
// MaxWaitMillis 2^31-1 (24.8 days) for a byte.
func longFetch(topic string) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 11, -1, math.MaxInt32, 1, 1<<20
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.PartitionMaxBytes = 0, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// A client that sends a Fetch waiting 2^31-1 ms on an empty partition and
// disconnects leaves nothing behind: the parked fetch ends with its
// connection, whose descriptor and goroutines the server lets go at once,
// not 24.8 days later.
func TestParkedFetchEndsWhenClientDisconnects(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopic("empty", 1); err != nil {
		t.Fatal(err)
	}
	rc := dial(t, ts.addr)
	rc.send(longFetch("empty"))
	time.Sleep(200 * time.Millisecond) // parked by now
	if n := openConns(ts); n != 1 {
		t.Fatalf("server holds %d connections, want 1", n)
	}
	rc.c.Close()
	start := time.Now()
	if !awaitOpenConns(ts, 0, 2*time.Second) {
		t.Fatal("the server still holds the connection 2s after its client disconnected during a parked fetch")
	}
	t.Logf("connection released %v after the client's close", time.Since(start).Round(time.Millisecond))
}

// A Fetch asking to wait 2^31-1 ms parks at most RequestTimeout, and is
// then answered (empty) like any fetch whose wait ran out.
func TestParkedFetchCappedByRequestTimeout(t *testing.T) {
	const requestTimeout = 500 * time.Millisecond
	ts := startServer(t, Options{RequestTimeout: requestTimeout})
	if err := ts.eng.CreateTopic("empty", 1); err != nil {
		t.Fatal(err)
	}
	rc := dial(t, ts.addr)
	start := time.Now()
	resp := rc.roundTrip(longFetch("empty")).(*kmsg.FetchResponse)
	took := time.Since(start)
	if resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 || len(resp.Topics[0].Partitions[0].RecordBatches) != 0 {
		t.Fatalf("fetch: error %d, partition error %d, %d record bytes; want an empty answer",
			resp.ErrorCode, resp.Topics[0].Partitions[0].ErrorCode, len(resp.Topics[0].Partitions[0].RecordBatches))
	}
	if took < requestTimeout || took > requestTimeout+2*time.Second {
		t.Fatalf("fetch answered after %v, want about the request timeout %v", took, requestTimeout)
	}
}

// joinGroup sends a JoinGroup v3 (before KIP-394, no member id exchange) for group as member
// (empty: a new member) with the given rebalance timeout.
func joinGroup(rc *rawConn, grp, member string, rebalance int32) {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version, req.Group, req.MemberID = 3, grp, member
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis, req.ProtocolType = 60000, rebalance, "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", []byte{0, 1}
	req.Protocols = append(req.Protocols, p)
	rc.send(req)
}

// stableGroup makes a group of one member (its first JoinGroup and
// SyncGroup) on its own connection, and returns that connection.
func stableGroup(t *testing.T, ts *testServer, grp string) *rawConn {
	t.Helper()
	a := dial(t, ts.addr)
	joinGroup(a, grp, "", 60000)
	jr := kmsg.NewPtrJoinGroupResponse()
	jr.Version = 3
	a.recv(jr)
	if jr.ErrorCode != 0 {
		t.Fatalf("first member's join: error %d", jr.ErrorCode)
	}
	sreq := kmsg.NewPtrSyncGroupRequest()
	sreq.Version, sreq.Group, sreq.Generation, sreq.MemberID = 3, grp, jr.Generation, jr.MemberID
	sa := kmsg.NewSyncGroupRequestGroupAssignment()
	sa.MemberID, sa.MemberAssignment = jr.MemberID, []byte{}
	sreq.GroupAssignment = append(sreq.GroupAssignment, sa)
	if sr := a.roundTrip(sreq).(*kmsg.SyncGroupResponse); sr.ErrorCode != 0 {
		t.Fatalf("first member's sync: error %d", sr.ErrorCode)
	}
	return a
}

// A second member's JoinGroup parks until the first rejoins; if its client
// disconnects meanwhile, the parked join ends with the connection, which
// the server lets go at once instead of waiting out the rebalance.
func TestParkedJoinGroupEndsWhenClientDisconnects(t *testing.T) {
	ts := startServer(t, Options{})
	stableGroup(t, ts, "g")
	b := dial(t, ts.addr)
	joinGroup(b, "g", "", math.MaxInt32)
	time.Sleep(200 * time.Millisecond) // parked by now
	if n := openConns(ts); n != 2 {
		t.Fatalf("server holds %d connections, want 2", n)
	}
	b.c.Close()
	if !awaitOpenConns(ts, 1, 2*time.Second) {
		t.Fatal("the server still holds the connection 2s after its client disconnected during a parked JoinGroup")
	}
}

// A JoinGroup asking for a rebalance timeout of 2^31-1 ms waits at most
// MaxRebalanceTimeout for the other members: the join phase then ends
// without the member that did not rejoin, and the parked join is answered.
func TestParkedJoinGroupCappedByMaxRebalanceTimeout(t *testing.T) {
	const maxRebalance = 500 * time.Millisecond
	ts := startServer(t, Options{Group: group.Options{MinSessionTimeout: 100 * time.Millisecond,
		MaxSessionTimeout: time.Minute, MaxRebalanceTimeout: maxRebalance}})
	stableGroup(t, ts, "g")
	b := dial(t, ts.addr)
	start := time.Now()
	joinGroup(b, "g", "", math.MaxInt32)
	jr := kmsg.NewPtrJoinGroupResponse()
	jr.Version = 3
	b.recv(jr)
	took := time.Since(start)
	if jr.ErrorCode != 0 {
		t.Fatalf("second member's join: error %d", jr.ErrorCode)
	}
	if took > maxRebalance+2*time.Second {
		t.Fatalf("join answered after %v, want about the max rebalance timeout %v", took, maxRebalance)
	}
}
