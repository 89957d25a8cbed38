package kafka

// IncrementalAlterConfigs (key 44), versions 0-1: single topic configs set,
// deleted, appended to or subtracted from, each resource validated whole
// and stored all or nothing (alterconfigs.go has the rules both share).

import (
	"context"
	"strings"

	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/errcode"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) incrementalAlterConfigs(ctx context.Context, r *kmsg.IncrementalAlterConfigsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	deadline := s.mutationDeadline()
	seen := map[configResourceKey]int{}
	for _, rr := range r.Resources {
		seen[configResourceKey{rr.ResourceType, rr.ResourceName}]++
	}
	for _, rr := range r.Resources {
		out := kmsg.NewIncrementalAlterConfigsResponseResource()
		out.ResourceType, out.ResourceName = rr.ResourceType, rr.ResourceName
		err := s.alterTarget(rr.ResourceType, rr.ResourceName, seen)
		if err == nil {
			ops := make([]engine.ConfigOp, 0, len(rr.Configs))
			var nulls []string
			for _, c := range rr.Configs {
				op := engine.ConfigOp{Name: c.Name, Op: engine.ConfigOpKind(c.Op)}
				if c.Value != nil {
					op.Value = *c.Value
				} else if c.Op != kmsg.IncrementalAlterConfigOpDelete {
					nulls = append(nulls, c.Name)
				}
				ops = append(ops, op)
			}
			if len(nulls) > 0 {
				err = errcode.New(kerr.InvalidRequest.Code, "Null value not supported for : "+strings.Join(nulls, ", "))
			} else {
				err = s.mutate(ctx, deadline, func() error {
					return s.eng.Frontend().IncrementalAlterTopicConfig(rr.ResourceName, ops, r.ValidateOnly)
				})
			}
		}
		out.ErrorCode, out.ErrorMessage = s.configError(kmsg.IncrementalAlterConfigs, rr.ResourceName, err)
		if err == nil && !r.ValidateOnly {
			s.log.Info("altered topic configs", "topic", rr.ResourceName, "changes", len(rr.Configs))
		}
		resp.Resources = append(resp.Resources, out)
	}
	return resp
}
