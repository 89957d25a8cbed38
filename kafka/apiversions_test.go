package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

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

// TestProduceListedFromV0: ApiVersions lists Produce from version 0 (so
// librdkafka compresses), while a v0-v2 Produce closes the connection, as
// Kafka 4.0 does.
func TestProduceListedFromV0(t *testing.T) {
	ts := startServer(t, Options{})
	rc := dial(t, ts.addr)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
	found := false
	for _, k := range rc.roundTrip(req).(*kmsg.ApiVersionsResponse).ApiKeys {
		if k.ApiKey == kmsg.Produce.Int16() {
			found = k.MinVersion == 0 && k.MaxVersion >= 9
		}
	}
	if !found {
		t.Fatal("Produce not listed from version 0")
	}
	p := kmsg.NewPtrProduceRequest()
	p.Version, p.Acks, p.TimeoutMillis = 2, 1, 1000
	rc.send(p)
	rc.expectClosed()
}

func TestApiVersions(t *testing.T) {
	ts := startServer(t, Options{})
	rc := dial(t, ts.addr)
	for v := int16(0); v <= 4; v++ {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = v
		req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
		resp := rc.roundTrip(req).(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode != 0 || len(resp.ApiKeys) != len(apis) {
			t.Fatalf("v%d: error %d, %d keys", v, resp.ErrorCode, len(resp.ApiKeys))
		}
	}
	// KIP-511: a version above the maximum gets v0's layout with
	// UNSUPPORTED_VERSION and the table, and the connection stays open.
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 5
	rc.send(req)
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	rc.recv(resp)
	if resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) != len(apis) {
		t.Fatalf("fallback: error %d, %d keys", resp.ErrorCode, len(resp.ApiKeys))
	}
	// v3 carries the client's software name and version, which Kafka
	// requires to match its pattern (an empty one is INVALID_REQUEST).
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
	if resp := rc.roundTrip(req).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
		t.Fatalf("after fallback: error %d", resp.ErrorCode)
	}
}

func TestVersionsWithinKmsg(t *testing.T) {
	for _, a := range apis {
		req := kmsg.RequestForKey(a.key.Int16())
		if req == nil || a.max > req.MaxVersion() || a.min > a.max {
			t.Errorf("%s: advertised %d-%d, kmsg max %d", a.key.Name(), a.min, a.max, req.MaxVersion())
		}
	}
}
