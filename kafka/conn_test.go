package kafka

import (
	"encoding/binary"
	"io"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// connFrame builds a request frame by hand: header v1 (v2 with tags
// when flexible, the raw tag section given), then the body.
func connFrame(req kmsg.Request, corr int32, tags []byte) []byte {
	frame := []byte{0, 0, 0, 0}
	frame = binary.BigEndian.AppendUint16(frame, uint16(req.Key()))
	frame = binary.BigEndian.AppendUint16(frame, uint16(req.GetVersion()))
	frame = binary.BigEndian.AppendUint32(frame, uint32(corr))
	frame = binary.BigEndian.AppendUint16(frame, 4)
	frame = append(frame, "test"...)
	if req.IsFlexible() {
		if tags == nil {
			tags = []byte{0}
		}
		frame = append(frame, tags...)
	}
	frame = req.AppendTo(frame)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	return frame
}

// connReadFrame reads one response frame: its correlation id and body
// after the correlation id.
func connReadFrame(t *testing.T, rc *rawConn) (int32, []byte) {
	t.Helper()
	var size [4]byte
	if _, err := io.ReadFull(rc.c, size[:]); err != nil {
		t.Fatalf("read response: %v", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(rc.c, body); err != nil {
		t.Fatal(err)
	}
	return int32(binary.BigEndian.Uint32(body)), body[4:]
}

// Kafka's getCoordinator maps the key type with CoordinatorType.forId,
// which throws InvalidRequestException for any id it does not know, so a
// negative key type is INVALID_REQUEST (for each key from v4). Here only
// types above 1 are refused: -1 is answered as a group lookup.
func TestConnFindCoordinatorNegativeKeyType(t *testing.T) {
	ts := quietServer(t, Options{})
	rc := dial(t, ts.addr)
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.Version = 3
	req.CoordinatorKey = "g"
	req.CoordinatorType = -1
	resp := rc.roundTrip(req).(*kmsg.FindCoordinatorResponse)
	if resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("v3 key type -1: error %d, want INVALID_REQUEST (%d)", resp.ErrorCode, kerr.InvalidRequest.Code)
	}
	req4 := kmsg.NewPtrFindCoordinatorRequest()
	req4.Version = 4
	req4.CoordinatorKeys = []string{"g", "h"}
	req4.CoordinatorType = -1
	resp4 := rc.roundTrip(req4).(*kmsg.FindCoordinatorResponse)
	for _, c := range resp4.Coordinators {
		if c.ErrorCode != kerr.InvalidRequest.Code {
			t.Errorf("v4 key type -1, key %q: error %d, want INVALID_REQUEST (%d)", c.Key, c.ErrorCode, kerr.InvalidRequest.Code)
		}
	}
}

// Kafka's handleTopicMetadataRequest fills topic_authorized_operations
// (and, v8-10, cluster_authorized_operations) when the request asks for
// them; with no authorizer AuthHelper.authorizedOperations answers every
// operation the resource type supports: for a topic READ, WRITE, CREATE,
// DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS (3576), for the
// cluster CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS,
// ALTER_CONFIGS, IDEMPOTENT_WRITE (8096). Here both stay at the schema's
// "not requested" INT32_MIN, so an AdminClient's describeTopics with
// includeAuthorizedOperations sees null.
func TestConnMetadataAuthorizedOperations(t *testing.T) {
	ts := quietServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	rc := dial(t, ts.addr)
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 8
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("t")
	req.Topics = append(req.Topics, rt)
	req.IncludeTopicAuthorizedOperations = true
	req.IncludeClusterAuthorizedOperations = true
	resp := rc.roundTrip(req).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("topics %+v", resp.Topics)
	}
	if got := resp.Topics[0].AuthorizedOperations; got != 3576 {
		t.Errorf("topic_authorized_operations %d, want 3576", got)
	}
	if got := resp.AuthorizedOperations; got != 8096 {
		t.Errorf("cluster_authorized_operations %d, want 8096", got)
	}
}

// A request whose frame arrives in two parts, the first 0.6 s after the
// last response and the second 0.6 s later, never leaves the connection
// quiet for IdleTimeout (1 s); yet the deadline awaitRequest set before its
// first byte also bounds the rest of the frame, so the connection is cut
// mid-request (and counted as a bad frame). Kafka's idle clock restarts
// with every read.
func TestConnIdleDeadlineCutsActiveFrame(t *testing.T) {
	const idle = time.Second
	ts := quietServer(t, Options{IdleTimeout: idle})
	rc := dial(t, ts.addr)
	m := kmsg.NewPtrMetadataRequest()
	m.Version = 9
	rc.roundTrip(m) // the server waits for the next request from here
	f := connFrame(m, 2, nil)
	time.Sleep(idle * 6 / 10)
	if _, err := rc.c.Write(f[:6]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(idle * 6 / 10) // quiet for 0.6 s at most, never 1 s
	if _, err := rc.c.Write(f[6:]); err != nil {
		t.Fatal(err)
	}
	rc.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(rc.c, size[:]); err != nil {
		t.Fatalf("request sent with no gap of IdleTimeout got no response: %v", err)
	}
}

// The KIP-511 answer to an ApiVersions of an unsupported version counts its
// UNSUPPORTED_VERSION under idemlog_kafka_errors_total but never counts the
// request under idemlog_kafka_requests_total: errors exceed requests.
func TestConnApiVersionsFallbackCounted(t *testing.T) {
	ts := quietServer(t, Options{})
	rc := dial(t, ts.addr)
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 9
	if _, err := rc.c.Write(connFrame(av, 1, nil)); err != nil {
		t.Fatal(err)
	}
	if c, _ := connReadFrame(t, rc); c != 1 {
		t.Fatalf("correlation %d", c)
	}
	errs := value(t, ts.srv.m.errors.WithLabelValues("ApiVersions", "35"))
	reqs := value(t, ts.srv.m.requests.WithLabelValues("ApiVersions"))
	if errs != 1 || reqs != 1 {
		t.Errorf("ApiVersions requests %v, UNSUPPORTED_VERSION errors %v; want 1 and 1", reqs, errs)
	}
}
