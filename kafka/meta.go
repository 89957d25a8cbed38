package kafka

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"

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
	// ErrOffsetMetadataTooLarge: a committed offset's metadata is longer
	// than Options.MaxOffsetMetadata (Kafka's offset.metadata.max.bytes).
	ErrOffsetMetadataTooLarge = errcode.New(kerr.OffsetMetadataTooLarge.Code, "offset metadata too large")
)

// errCode maps an error to its Kafka code. Every sentinel carries one
// (errcode); an engine that is closing answers like a broker that is
// shutting down, so clients retry elsewhere or later.
//
// A file-system error that no sentinel wraps (the engine's topic creation
// returns them as they come) is KAFKA_STORAGE_ERROR when it says the disk
// cannot take the write, as Kafka answers for a log directory that failed,
// not UNKNOWN_SERVER_ERROR, which tells the client nothing.
func errCode(err error) int16 {
	if errors.Is(err, engine.ErrClosed) {
		return kerr.NotLeaderForPartition.Code
	}
	c := errcode.Code(err)
	if c == errcode.UnknownServerError && isStorageFailure(err) {
		return errcode.KafkaStorageError
	}
	return c
}

// isStorageFailure reports whether err is the disk refusing: no space, no
// quota, an I/O error or a read-only file system.
func isStorageFailure(err error) bool {
	for _, e := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT, syscall.EIO, syscall.EROFS} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

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
			err := s.eng.Frontend().CreateTopic(name, s.opts.DefaultPartitions, nil)
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

// createTopics creates topics; replication factor 1 (or -1, the default)
// is all a single node offers. Configs are every topic config of Kafka,
// validated as Kafka validates them (engine.Frontend.ValidateTopicConfig) and kept
// with the topic; v5+ answers with the topic's resulting configs.
func (s *Server) createTopics(r *kmsg.CreateTopicsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
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
			err = s.eng.Frontend().CreateTopic(rt.Topic, n, cfg)
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
	// Kafka's ControllerApis.deleteTopics: an entry with both a name and
	// an id, or neither, and a name given twice, are INVALID_REQUEST, and
	// nothing is deleted for them. (Without this: a name sent with another
	// topic's id deleted the named one.)
	names := map[string]int{}
	for _, tg := range targets {
		if tg.name != nil {
			names[*tg.name]++
		}
	}
	for _, tg := range targets {
		t := kmsg.NewDeleteTopicsResponseTopic()
		t.Topic, t.TopicID = tg.name, tg.id
		var err error
		switch {
		case tg.name != nil && *tg.name != "" && tg.id != ([16]byte{}):
			err = errcode.New(kerr.InvalidRequest.Code, "both a topic name and a topic id")
		case (tg.name == nil || *tg.name == "") && tg.id == ([16]byte{}):
			err = errcode.New(kerr.InvalidRequest.Code, "neither a topic name nor a topic id")
		case tg.name != nil && names[*tg.name] > 1:
			err = errcode.New(kerr.InvalidRequest.Code, "duplicate topic name")
		}
		if err != nil {
			t.ErrorCode = s.code(kmsg.DeleteTopics, err)
			resp.Topics = append(resp.Topics, t)
			continue
		}
		if tg.name == nil || *tg.name == "" {
			t.Topic = nil
			if name, ok := s.eng.Frontend().TopicByID(tg.id); ok {
				t.Topic = &name
			} else {
				err = ErrUnknownTopicID
			}
		}
		if err == nil {
			if isInternal(*t.Topic) {
				err = engine.ErrInvalidTopic
			} else {
				t.TopicID, _ = s.eng.Frontend().TopicID(*t.Topic)
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
		err := s.groups.DeleteGroup(g, s.eng.Frontend().GroupHasOffsets(g), func() error {
			_, err := s.eng.Frontend().DeleteGroupOffsets(g)
			return err
		})
		gr.ErrorCode = s.code(kmsg.DeleteGroups, err)
		resp.Groups = append(resp.Groups, gr)
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
