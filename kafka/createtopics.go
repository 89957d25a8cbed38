package kafka

// CreateTopics (key 19), versions 0-7: topics with replication factor 1
// (or -1) on this node, Kafka's topic configs validated as Kafka validates
// them, the resulting configs answered from v5; a creation past the
// machine's or the engine's limits is refused before anything is made.

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/errcode"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// createTopics creates topics; replication factor 1 (or -1, the default)
// is all a single node offers. Configs are every topic config of Kafka,
// validated as Kafka validates them (engine.Frontend.ValidateTopicConfig) and kept
// with the topic; v5+ answers with the topic's resulting configs.
func (s *Server) createTopics(ctx context.Context, r *kmsg.CreateTopicsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
	deadline := s.mutationDeadline()
	// A name given twice is refused for every entry, as Kafka does
	// ("Duplicate topic name"), and nothing is created under it.
	seen := map[string]int{}
	for _, rt := range r.Topics {
		seen[rt.Topic]++
	}
	for _, rt := range r.Topics {
		t := kmsg.NewCreateTopicsResponseTopic()
		t.Topic = rt.Topic
		n := int(rt.NumPartitions)
		if n == -1 {
			n = s.opts.DefaultPartitions
		}
		// A manual assignment gives the partitions (each on this node
		// alone); with it, the count and the replication factor must be
		// left at -1 (Kafka's rule).
		manual := len(rt.ReplicaAssignment) > 0
		if manual {
			n = len(rt.ReplicaAssignment)
		}
		cfg := map[string]string{}
		var nulls []string
		for _, c := range rt.Configs {
			if c.Value != nil {
				cfg[c.Name] = *c.Value // the last of a name wins, as in Kafka
			} else {
				nulls = append(nulls, c.Name)
			}
		}
		var err error
		switch {
		case seen[rt.Topic] > 1:
			err = errcode.New(kerr.InvalidRequest.Code, "duplicate topic name")
		case engine.ValidateTopic(rt.Topic) != nil:
			err = engine.ErrInvalidTopic
		case manual && (rt.NumPartitions != -1 || rt.ReplicationFactor != -1):
			err = errcode.New(kerr.InvalidRequest.Code, "a replica assignment with a partition count or replication factor")
		case manual && !onlyNode(rt.ReplicaAssignment, s.opts.NodeID):
			err = errcode.New(kerr.InvalidReplicaAssignment.Code, "replicas other than this node")
		case n <= 0 || n > maxPartitions:
			err = ErrInvalidPartitions
		case !manual && rt.ReplicationFactor != 1 && rt.ReplicationFactor != -1:
			err = ErrInvalidReplication
		case isInternal(rt.Topic):
			err = engine.ErrInvalidTopic
		case len(nulls) > 0:
			err = &engine.ConfigError{Msg: "Null value not supported for topic configs: " + strings.Join(nulls, ",")}
		case r.ValidateOnly:
			if err = s.eng.Frontend().ValidateTopicConfig(cfg); err == nil {
				if _, ok := s.eng.Topics()[rt.Topic]; ok {
					err = ErrTopicAlreadyExists
				}
			}
		default:
			// The existence check and the creation are one step:
			// concurrent creations of a topic give one success.
			err = s.mutate(ctx, deadline, func() error { return s.eng.Frontend().CreateTopic(rt.Topic, n, cfg) })
		}
		if err != nil {
			t.ErrorCode = s.code(kmsg.CreateTopics, err)
			msg := fmt.Sprintf("cannot create topic %q: %v", rt.Topic, err)
			if ce := (*engine.ConfigError)(nil); errors.As(err, &ce) {
				msg = ce.Msg // Kafka's own words, which tools show as they are
			}
			t.ErrorMessage = &msg
		} else {
			t.TopicID, _ = s.eng.Frontend().TopicID(rt.Topic)
			t.NumPartitions, t.ReplicationFactor = int32(n), 1
			if r.Version >= 5 {
				t.Configs = s.createdConfigs(rt.Topic, cfg, r.ValidateOnly)
			}
			if !r.ValidateOnly {
				s.log.Info("created topic", "topic", rt.Topic, "partitions", n)
			}
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// createdConfigs is CreateTopics v5+'s list of a new topic's configs: every
// topic config, sorted by name, with its value and source.
func (s *Server) createdConfigs(topic string, cfg map[string]string, validateOnly bool) []kmsg.CreateTopicsResponseTopicConfig {
	entries := s.eng.Frontend().DefaultTopicConfig()
	if !validateOnly {
		if got, err := s.eng.Frontend().TopicConfig(topic); err == nil {
			entries, cfg = got, nil
		}
	}
	out := make([]kmsg.CreateTopicsResponseTopicConfig, 0, len(entries))
	for _, c := range entries {
		e := kmsg.NewCreateTopicsResponseTopicConfig()
		value, source := c.Value, engineSource(c)
		if v, ok := cfg[c.Name]; ok {
			value, source = strings.TrimSpace(v), kmsg.ConfigSourceDynamicTopicConfig
		} else if c.Override {
			source = kmsg.ConfigSourceDynamicTopicConfig
		}
		e.Name, e.Value, e.Source = c.Name, &value, int8(source)
		out = append(out, e)
	}
	return out
}

// maxPartitions bounds a topic's partition count through the listener
// (CreateTopics, CreatePartitions alike).
const maxPartitions = 1 << 16

// onlyNode reports whether every partition of a manual assignment has
// exactly this node as its replica.
func onlyNode(assign []kmsg.CreateTopicsRequestTopicReplicaAssignment, node int32) bool {
	for _, a := range assign {
		if len(a.Replicas) != 1 || a.Replicas[0] != node {
			return false
		}
	}
	return true
}
