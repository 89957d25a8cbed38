package kafka

// Metadata (key 3), versions 0-12: this node as the leader, replica and
// ISR of every partition (leader epoch 0), topics by name or by id (v10+),
// and, with Options.AutoCreateTopics and the request's consent (always
// before v4), the creation of a topic asked about.

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/idemlog/idemlog/engine"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) broker() kmsg.MetadataResponseBroker {
	host, port := s.advertised()
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = s.opts.NodeID, host, port
	return b
}

func isInternal(topic string) bool { return engine.IsInternalTopic(topic) }

// metadata answers with the single broker as leader, replica and ISR of
// every partition, at a constant leader epoch 0.
func (s *Server) metadata(ctx context.Context, r *kmsg.MetadataRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.MetadataResponse)
	resp.Brokers = []kmsg.MetadataResponseBroker{s.broker()}
	resp.ClusterID = &s.opts.ClusterID
	resp.ControllerID = s.opts.NodeID
	if r.Version >= 8 && r.Version <= 10 && r.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = clusterOperations
	}
	topics := s.eng.Topics()
	var names []string
	all := r.Topics == nil || (r.Version == 0 && len(r.Topics) == 0)
	if all {
		for t := range topics {
			names = append(names, t)
		}
		slices.Sort(names)
	}
	for _, rt := range r.Topics {
		if rt.Topic == nil {
			// v10+ may ask by id alone.
			name, ok := s.eng.Frontend().TopicByID(rt.TopicID)
			if !ok {
				t := kmsg.NewMetadataResponseTopic()
				t.TopicID = rt.TopicID
				t.ErrorCode = s.code(kmsg.Metadata, ErrUnknownTopicID)
				resp.Topics = append(resp.Topics, t)
				continue
			}
			names = append(names, name)
			continue
		}
		names = append(names, *rt.Topic)
	}
	autoCreate := s.opts.AutoCreateTopics && (r.Version < 4 || r.AllowAutoTopicCreation)
	var deadline time.Time
	if autoCreate {
		deadline = s.mutationDeadline()
	}
	// The requested topics are a set: each is answered once, as Kafka
	// does.
	answered := map[string]bool{}
	for _, name := range names {
		if answered[name] {
			continue
		}
		answered[name] = true
		t := kmsg.NewMetadataResponseTopic()
		t.Topic = &name
		n, ok := topics[name]
		if !ok && autoCreate && !isInternal(name) {
			// As CreateTopics creates: a name that collides with an
			// existing topic's once '.' and '_' are taken alike is
			// refused. (Without this: auto-creation made "a.b" beside
			// "a_b".) One another client created meanwhile is answered.
			err := s.mutate(ctx, deadline, func() error { return s.eng.Frontend().CreateTopic(name, s.opts.DefaultPartitions, nil) })
			switch {
			case err == nil:
				s.log.Info("auto-created topic", "topic", name, "partitions", s.opts.DefaultPartitions)
				n, ok = s.opts.DefaultPartitions, true
			case errors.Is(err, engine.ErrTopicAlreadyExists):
				n, ok = s.eng.Topics()[name]
			}
			if !ok {
				if err == nil || errors.Is(err, engine.ErrTopicAlreadyExists) {
					err = engine.ErrUnknownTopicOrPartition // deleted again meanwhile
				}
				t.ErrorCode = s.code(kmsg.Metadata, err)
				resp.Topics = append(resp.Topics, t)
				continue
			}
		}
		if !ok {
			err := error(engine.ErrUnknownTopicOrPartition)
			if engine.ValidateTopic(name) != nil {
				err = engine.ErrInvalidTopic
			}
			t.ErrorCode = s.code(kmsg.Metadata, err)
			resp.Topics = append(resp.Topics, t)
			continue
		}
		t.TopicID, _ = s.eng.Frontend().TopicID(name)
		t.IsInternal = isInternal(name)
		if r.Version >= 8 && r.IncludeTopicAuthorizedOperations {
			t.AuthorizedOperations = topicOperations
		}
		for i := range n {
			p := kmsg.NewMetadataResponseTopicPartition()
			p.Partition, p.Leader, p.LeaderEpoch = int32(i), s.opts.NodeID, 0
			p.Replicas, p.ISR = []int32{s.opts.NodeID}, []int32{s.opts.NodeID}
			p.OfflineReplicas = []int32{}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// The operations a client is authorized for, asked for by Metadata v8+
// (KIP-430): with no authorizer, Kafka answers every operation the resource
// type supports, as bit sets of AclOperation codes. A topic: READ 3, WRITE
// 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8, DESCRIBE_CONFIGS 10,
// ALTER_CONFIGS 11. The cluster: CREATE 5, ALTER 7, DESCRIBE 8,
// CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11,
// IDEMPOTENT_WRITE 12. (Without this: they stayed "not requested".)
const (
	topicOperations   = 1<<3 | 1<<4 | 1<<5 | 1<<6 | 1<<7 | 1<<8 | 1<<10 | 1<<11
	clusterOperations = 1<<5 | 1<<7 | 1<<8 | 1<<9 | 1<<10 | 1<<11 | 1<<12
)
