package kafka

// AlterConfigs (key 33), versions 0-2, and the rules it shares with
// IncrementalAlterConfigs (key 44, versions 0-1, incrementalalterconfigs.go):
// kafka-configs.sh --alter, kadm's AlterTopicConfigs, sarama's
// ClusterAdmin.AlterConfig and librdkafka's admin API change a topic's
// configs while it is open.
//
// Each resource is all or nothing: the topic's overrides after the change
// are validated whole, as Kafka validates the resulting config, and stored
// and applied only if every entry passes (engine.IncrementalAlterTopicConfig,
// engine.ReplaceTopicConfig). AlterConfigs replaces the topic's overrides
// with the pairs it lists; IncrementalAlterConfigs sets, deletes, appends to
// or subtracts from single keys. ValidateOnly answers what the change would
// get and stores nothing. Broker resources take no dynamic configs here:
// the engine's settings come from its options, fixed while it runs.
//
// Errors, as Kafka answers them: a resource named twice INVALID_REQUEST
// for both copies; a key named twice INVALID_REQUEST; a null value
// INVALID_REQUEST (for AlterConfigs, and for every incremental operation but
// DELETE); an empty topic name INVALID_REQUEST; an unknown topic
// UNKNOWN_TOPIC_OR_PARTITION; a bad name or value INVALID_CONFIG with
// Kafka's message.

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

// configResourceKey names a resource for the "named twice" rule.
type configResourceKey struct {
	typ  kmsg.ConfigResourceType
	name string
}

// alterTarget checks what every alteration checks about its resource; nil
// means the topic may be altered.
func (s *Server) alterTarget(typ kmsg.ConfigResourceType, name string, seen map[configResourceKey]int) error {
	switch {
	case seen[configResourceKey{typ, name}] > 1:
		return errcode.New(kerr.InvalidRequest.Code, "Each resource must appear at most once.")
	case typ == kmsg.ConfigResourceTypeBroker:
		return errcode.New(kerr.InvalidRequest.Code, "idemlog's broker configs are its startup options; they cannot be altered while it runs")
	case typ != kmsg.ConfigResourceTypeTopic:
		return errcode.New(kerr.InvalidRequest.Code, "unsupported resource type")
	case name == "":
		return errcode.New(kerr.InvalidRequest.Code, "Default topic resources are not allowed.")
	}
	return engine.ValidateTopic(name)
}

func (s *Server) alterConfigs(ctx context.Context, r *kmsg.AlterConfigsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.AlterConfigsResponse)
	deadline := s.mutationDeadline()
	seen := map[configResourceKey]int{}
	for _, rr := range r.Resources {
		seen[configResourceKey{rr.ResourceType, rr.ResourceName}]++
	}
	for _, rr := range r.Resources {
		out := kmsg.NewAlterConfigsResponseResource()
		out.ResourceType, out.ResourceName = rr.ResourceType, rr.ResourceName
		err := s.alterTarget(rr.ResourceType, rr.ResourceName, seen)
		if err == nil {
			cfg := make(map[string]string, len(rr.Configs))
			var nulls []string
			for _, c := range rr.Configs {
				if _, dup := cfg[c.Name]; dup {
					err = errcode.New(kerr.InvalidRequest.Code, "Error due to duplicate config keys")
					break
				}
				if c.Value == nil {
					nulls = append(nulls, c.Name)
					continue
				}
				cfg[c.Name] = *c.Value
			}
			switch {
			case err != nil:
			case len(nulls) > 0:
				err = errcode.New(kerr.InvalidRequest.Code, "Null value not supported for : "+strings.Join(nulls, ", "))
			default:
				err = s.mutate(ctx, deadline, func() error { return s.eng.Frontend().ReplaceTopicConfig(rr.ResourceName, cfg, r.ValidateOnly) })
			}
		}
		out.ErrorCode, out.ErrorMessage = s.configError(kmsg.AlterConfigs, rr.ResourceName, err)
		if err == nil && !r.ValidateOnly {
			s.log.Info("altered topic configs", "topic", rr.ResourceName, "configs", len(rr.Configs))
		}
		resp.Resources = append(resp.Resources, out)
	}
	return resp
}

// configError is a resource's error code and message: Kafka's own message
// where the engine gives one (a *engine.ConfigError), else the error's.
func (s *Server) configError(key kmsg.Key, topic string, err error) (int16, *string) {
	if err == nil {
		return 0, nil
	}
	code := s.code(key, err)
	var msg string
	var ce *engine.ConfigError
	switch {
	case errors.As(err, &ce):
		msg = ce.Msg
	case errors.Is(err, engine.ErrUnknownTopicOrPartition):
		msg = fmt.Sprintf("The topic '%s' does not exist.", topic)
	default:
		msg = err.Error()
	}
	return code, &msg
}
