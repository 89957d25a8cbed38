package kafka

// FindCoordinator (key 10), versions 0-6: this node for every group and
// transactional id, one key (v0-3) or a batch of keys (v4+, KIP-699).

import (
	"github.com/idemlog/idemlog/errcode"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// findCoordinator names this broker for every group and transactional id.
func (s *Server) findCoordinator(r *kmsg.FindCoordinatorRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
	host, port := s.advertised()
	check := func(key string) int16 {
		if r.CoordinatorType < 0 || r.CoordinatorType > 1 { // an int8: -1 is no group
			return s.code(kmsg.FindCoordinator, errcode.New(kerr.InvalidRequest.Code, "unknown coordinator type"))
		}
		if key == "" {
			return s.code(kmsg.FindCoordinator, errcode.New(kerr.InvalidRequest.Code, "empty coordinator key"))
		}
		return 0
	}
	if r.Version < 4 {
		resp.ErrorCode = check(r.CoordinatorKey)
		resp.NodeID, resp.Host, resp.Port = s.opts.NodeID, host, port
		return resp
	}
	for _, key := range r.CoordinatorKeys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.NodeID, c.Host, c.Port = key, s.opts.NodeID, host, port
		c.ErrorCode = check(key)
		resp.Coordinators = append(resp.Coordinators, c)
	}
	return resp
}
