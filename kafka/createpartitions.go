package kafka

// CreatePartitions (key 37), versions 0-3: a topic's partition count
// raised, the new partitions taking the topic's configs (kafka-topics
// --alter --partitions).

import (
	"context"
	"fmt"

	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/errcode"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// createPartitions answers CreatePartitions v0-3 (kafka-topics --alter
// --partitions): a topic's partition count rises to Count, the new
// partitions taking the topic's configs. An assignment, if given, must
// place each new partition on this node alone. A topic named twice is
// refused for every entry (INVALID_REQUEST), as Kafka does.
func (s *Server) createPartitions(ctx context.Context, r *kmsg.CreatePartitionsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.CreatePartitionsResponse)
	deadline := s.mutationDeadline()
	seen := map[string]int{}
	for _, rt := range r.Topics {
		seen[rt.Topic]++
	}
	for _, rt := range r.Topics {
		t := kmsg.NewCreatePartitionsResponseTopic()
		t.Topic = rt.Topic
		cur, exists := s.eng.Topics()[rt.Topic]
		var err error
		switch {
		case seen[rt.Topic] > 1:
			err = errcode.New(kerr.InvalidRequest.Code, "duplicate topic in request")
		case !exists:
			err = engine.ErrUnknownTopicOrPartition
		case int(rt.Count) <= cur || rt.Count > maxPartitions:
			// Checked before ValidateOnly, so that it answers what the
			// request would.
			err = fmt.Errorf("topic %q has %d partitions, cannot go to %d (at most %d): %w", rt.Topic, cur, rt.Count, maxPartitions, engine.ErrInvalidPartitions)
		case rt.Assignment != nil && !newOnThisNode(rt.Assignment, int(rt.Count)-cur, s.opts.NodeID):
			err = errcode.New(kerr.InvalidReplicaAssignment.Code, "the assignment must give each new partition this node alone")
		case r.ValidateOnly:
			if engine.IsInternalTopic(rt.Topic) {
				err = engine.ErrInvalidTopic
			}
		default:
			if err = s.mutate(ctx, deadline, func() error { return s.eng.Frontend().AddPartitions(rt.Topic, int(rt.Count)) }); err == nil {
				s.log.Info("added partitions", "topic", rt.Topic, "from", cur, "to", rt.Count)
			}
		}
		if err != nil {
			t.ErrorCode = s.code(kmsg.CreatePartitions, err)
			msg := err.Error()
			t.ErrorMessage = &msg
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// newOnThisNode reports whether an assignment names n new partitions,
// each with this node as its only replica.
func newOnThisNode(assign []kmsg.CreatePartitionsRequestTopicAssignment, n int, node int32) bool {
	if len(assign) != n {
		return false
	}
	for _, a := range assign {
		if len(a.Replicas) != 1 || a.Replicas[0] != node {
			return false
		}
	}
	return true
}
