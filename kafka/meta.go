package kafka

import (
	"errors"
	"fmt"
	"slices"

	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/errcode"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Listener-side errors, with their Kafka codes.
var (
	ErrTopicAlreadyExists   = errcode.New(kerr.TopicAlreadyExists.Code, "topic already exists")
	ErrInvalidPartitions    = errcode.New(kerr.InvalidPartitions.Code, "invalid partition count")
	ErrInvalidReplication   = errcode.New(kerr.InvalidReplicationFactor.Code, "replication factor must be 1 (or -1)")
	ErrInvalidRequiredAcks  = errcode.New(kerr.InvalidRequiredAcks.Code, "acks must be -1, 0 or 1")
	ErrUnknownTopicID       = errcode.New(kerr.UnknownTopicID.Code, "unknown topic id")
	ErrOperationNotAttempts = errcode.New(kerr.OperationNotAttempted.Code, "operation not attempted")
	ErrInvalidRecord        = errcode.New(kerr.InvalidRecord.Code, "produce must carry exactly one record batch per partition")
	ErrInvalidTxnRequest    = errcode.New(kerr.InvalidRequest.Code, "invalid transactional request")
)

// errCode maps an error to its Kafka code. Every sentinel carries one
// (errcode); an engine that is closing answers like a broker that is
// shutting down, so clients retry elsewhere or later.
func errCode(err error) int16 {
	if errors.Is(err, engine.ErrClosed) {
		return kerr.NotLeaderForPartition.Code
	}
	return errcode.Code(err)
}

func (s *Server) apiVersionsTable(resp *kmsg.ApiVersionsResponse) {
	for _, a := range apis {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = a.key.Int16(), a.min, a.max
		resp.ApiKeys = append(resp.ApiKeys, k)
	}
}

func (s *Server) apiVersions(r *kmsg.ApiVersionsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.ApiVersionsResponse)
	s.apiVersionsTable(resp)
	return resp
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

func (s *Server) broker() kmsg.MetadataResponseBroker {
	host, port := s.advertised()
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = s.opts.NodeID, host, port
	return b
}

func isInternal(topic string) bool { return engine.IsInternalTopic(topic) }

// metadata answers with the single broker as leader, replica and ISR of
// every partition, at a constant leader epoch 0.
func (s *Server) metadata(r *kmsg.MetadataRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.MetadataResponse)
	resp.Brokers = []kmsg.MetadataResponseBroker{s.broker()}
	resp.ClusterID = &s.opts.ClusterID
	resp.ControllerID = s.opts.NodeID
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
			name, ok := s.eng.TopicByID(rt.TopicID)
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
	for _, name := range names {
		t := kmsg.NewMetadataResponseTopic()
		t.Topic = &name
		n, ok := topics[name]
		if !ok && autoCreate && !isInternal(name) {
			if err := s.eng.CreateTopic(name, s.opts.DefaultPartitions); err != nil {
				t.ErrorCode = s.code(kmsg.Metadata, err)
				resp.Topics = append(resp.Topics, t)
				continue
			}
			s.log.Info("auto-created topic", "topic", name, "partitions", s.opts.DefaultPartitions)
			n, ok = s.opts.DefaultPartitions, true
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
		t.TopicID, _ = s.eng.TopicID(name)
		t.IsInternal = isInternal(name)
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

// findCoordinator names this broker for every group and transactional id.
func (s *Server) findCoordinator(r *kmsg.FindCoordinatorRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
	host, port := s.advertised()
	check := func(key string) int16 {
		if r.CoordinatorType > 1 {
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

// createTopics creates topics; replication factor 1 (or -1, the default)
// is all a single node offers; configs are accepted and ignored.
func (s *Server) createTopics(r *kmsg.CreateTopicsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
	existing := s.eng.Topics()
	for _, rt := range r.Topics {
		t := kmsg.NewCreateTopicsResponseTopic()
		t.Topic = rt.Topic
		n := int(rt.NumPartitions)
		if n == -1 {
			n = s.opts.DefaultPartitions
		}
		cfg := map[string]string{}
		for _, c := range rt.Configs {
			if c.Value != nil {
				cfg[c.Name] = *c.Value
			}
		}
		var err error
		switch {
		case engine.ValidateTopic(rt.Topic) != nil:
			err = engine.ErrInvalidTopic
		case existing[rt.Topic] > 0:
			err = ErrTopicAlreadyExists
		case n <= 0 || n > 1<<16 || len(rt.ReplicaAssignment) > 0:
			err = ErrInvalidPartitions
		case rt.ReplicationFactor != 1 && rt.ReplicationFactor != -1:
			err = ErrInvalidReplication
		case isInternal(rt.Topic):
			err = engine.ErrInvalidTopic
		case r.ValidateOnly:
			err = engine.ValidateTopicConfig(cfg)
		default:
			err = s.eng.CreateTopicWithConfig(rt.Topic, n, cfg)
		}
		if err != nil {
			t.ErrorCode = s.code(kmsg.CreateTopics, err)
			msg := fmt.Sprintf("cannot create topic %q: %v", rt.Topic, err)
			t.ErrorMessage = &msg
		} else {
			t.TopicID, _ = s.eng.TopicID(rt.Topic)
			t.NumPartitions, t.ReplicationFactor = int32(n), 1
			s.log.Info("created topic", "topic", rt.Topic, "partitions", n)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

func (s *Server) deleteTopics(r *kmsg.DeleteTopicsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DeleteTopicsResponse)
	type target struct {
		name *string
		id   [16]byte
	}
	var targets []target
	for _, name := range r.TopicNames {
		targets = append(targets, target{name: &name})
	}
	for _, t := range r.Topics {
		targets = append(targets, target{name: t.Topic, id: t.TopicID})
	}
	for _, tg := range targets {
		t := kmsg.NewDeleteTopicsResponseTopic()
		t.Topic, t.TopicID = tg.name, tg.id
		var err error
		if tg.name == nil {
			if name, ok := s.eng.TopicByID(tg.id); ok {
				t.Topic = &name
			} else {
				err = ErrUnknownTopicID
			}
		}
		if err == nil {
			if isInternal(*t.Topic) {
				err = engine.ErrInvalidTopic
			} else {
				t.TopicID, _ = s.eng.TopicID(*t.Topic)
				err = s.eng.DeleteTopic(*t.Topic)
			}
		}
		if err != nil {
			t.ErrorCode = s.code(kmsg.DeleteTopics, err)
		} else {
			s.log.Info("deleted topic", "topic", *t.Topic)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

func (s *Server) deleteGroups(r *kmsg.DeleteGroupsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, g := range r.Groups {
		gr := kmsg.NewDeleteGroupsResponseGroup()
		gr.Group = g
		err := s.groups.DeleteGroup(g, s.eng.GroupHasOffsets(g))
		if err == nil {
			_, err = s.eng.DeleteGroupOffsets(g)
		}
		gr.ErrorCode = s.code(kmsg.DeleteGroups, err)
		resp.Groups = append(resp.Groups, gr)
	}
	return resp
}
