package kafka

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A connection that sends nothing for IdleTimeout is closed (Kafka's
// connections.max.idle.ms); one that keeps sending requests is not.
func TestIdleConnectionClosed(t *testing.T) {
	const idle = 300 * time.Millisecond
	ts := startServer(t, Options{IdleTimeout: idle})

	quiet := dial(t, ts.addr)
	busy := dial(t, ts.addr)
	start := time.Now()
	for time.Since(start) < 3*idle {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = 3
		req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
		if resp := busy.roundTrip(req).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
			t.Fatalf("ApiVersions error %d", resp.ErrorCode)
		}
		time.Sleep(idle / 4)
	}
	// quiet sent nothing for 3 idle periods: closed by now.
	quiet.expectClosed()
	// busy is closed only once it goes quiet too, not before.
	busy.c.SetReadDeadline(time.Now().Add(idle / 2))
	var b [1]byte
	if n, err := busy.c.Read(b[:]); n > 0 || err == nil || !isTimeout(err) {
		t.Fatalf("busy connection: read %d bytes, %v; want it open (a read timeout)", n, err)
	}
	busy.expectClosed()
}

// IdleTimeout < 0 never closes a quiet connection.
func TestIdleTimeoutNegativeKeepsConnection(t *testing.T) {
	ts := startServer(t, Options{IdleTimeout: -1})
	rc := dial(t, ts.addr)
	time.Sleep(300 * time.Millisecond)
	req := kmsg.NewPtrApiVersionsRequest()
	if resp := rc.roundTrip(req).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions error %d", resp.ErrorCode)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(interface{ Timeout() bool })
	return ok && ne.Timeout()
}
