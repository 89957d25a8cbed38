package kafka

// ApiVersions (key 18), versions 0-4: the versions served of every API
// (versions.go's table), KIP-511's client software name and version checked
// (v3+), and an answer at version 0 to a version this server does not know,
// so that a newer client can still learn what to send.

import (
	"github.com/idemlog/idemlog/errcode"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) apiVersionsTable(resp *kmsg.ApiVersionsResponse) {
	for _, a := range apis {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = a.key.Int16(), a.listedMin(), a.max
		resp.ApiKeys = append(resp.ApiKeys, k)
	}
}

func (s *Server) apiVersions(r *kmsg.ApiVersionsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.ApiVersionsResponse)
	if r.Version >= 3 && (!validSoftware(r.ClientSoftwareName) || !validSoftware(r.ClientSoftwareVersion)) {
		// Kafka's ApiVersionsRequest.isValid; the table still goes back,
		// as Kafka sends it with the error.
		resp.ErrorCode = kerr.InvalidRequest.Code
	}
	s.apiVersionsTable(resp)
	return resp
}

// validSoftware is Kafka's pattern for a client's software name and
// version: [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?
func validSoftware(v string) bool {
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
	if v == "" || !alnum(v[0]) || !alnum(v[len(v)-1]) {
		return false
	}
	for i := 1; i < len(v)-1; i++ {
		if c := v[i]; !alnum(c) && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

// apiVersionsFallback is KIP-511's answer to an ApiVersions request of a
// version above the advertised maximum: v0's layout, UNSUPPORTED_VERSION,
// and the table, from which the client picks a version and asks again.
func (s *Server) apiVersionsFallback() kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = s.code(kmsg.ApiVersions, errcode.New(kerr.UnsupportedVersion.Code, "unsupported version"))
	s.apiVersionsTable(resp)
	return resp
}
