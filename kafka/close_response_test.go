package kafka

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/idemlog/idemlog/kafka/group"
)

// A JoinGroup parked when the server closes is answered
// (COORDINATOR_NOT_AVAILABLE), every time: the reader's send of the
// finished response used to race the closed context and lose half the
// time, leaving the client a bare EOF.
func TestCloseAnswersParkedJoin(t *testing.T) {
	for i := range 10 {
		ts := startServer(t, Options{Group: group.Options{MinSessionTimeout: 100 * time.Millisecond,
			MaxSessionTimeout: time.Minute, InitialRebalanceDelay: time.Minute}})
		rc := dial(t, ts.addr)
		req := kmsg.NewPtrJoinGroupRequest()
		req.Version = 3 // no KIP-394 member id round trip
		req.Group, req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = "g", 10000, 60000
		req.ProtocolType = "consumer"
		proto := kmsg.NewJoinGroupRequestProtocol()
		proto.Name, proto.Metadata = "range", []byte{0}
		req.Protocols = append(req.Protocols, proto)
		rc.send(req)
		time.Sleep(50 * time.Millisecond) // parked in the initial delay
		go ts.srv.Close()
		resp := kmsg.NewPtrJoinGroupResponse()
		resp.Version = 3
		rc.recv(resp)
		if resp.ErrorCode != kerr.CoordinatorNotAvailable.Code {
			t.Fatalf("round %d: JoinGroup answered %d at Close, want COORDINATOR_NOT_AVAILABLE", i, resp.ErrorCode)
		}
	}
}
