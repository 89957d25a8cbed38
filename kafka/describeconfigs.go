package kafka

// DescribeConfigs (key 32), versions 0-4: a topic's configs (its overrides
// and the engine's values for the rest) and this broker's (read-only startup
// options), synonyms from v1, no documentation strings.

import (
	"cmp"
	"slices"
	"strconv"

	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/errcode"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// errConfigResource: a DescribeConfigs resource idemlog does not have
// (another broker, a logger, a group).
var errConfigResource = errcode.New(errcode.InvalidRequest, "no such config resource")

var configTypes = map[string]kmsg.ConfigType{
	"INT": kmsg.ConfigTypeInt, "LONG": kmsg.ConfigTypeLong, "STRING": kmsg.ConfigTypeString,
	"BOOLEAN": kmsg.ConfigTypeBoolean, "LIST": kmsg.ConfigTypeList, "DOUBLE": kmsg.ConfigTypeDouble,
}

// describeConfigs answers DescribeConfigs v0-4 for topics and for this
// broker (`kafka-topics --describe` asks for a topic's, `kafka-configs
// --describe` for either). A topic shows every topic config of Kafka:
// its overrides as dynamic topic configs (source 1), the rest as the
// engine's values (source 4 where its Options set them, 5 for Kafka's
// defaults); none is read-only (AlterConfigs changes them). The broker
// (its id) shows the engine's values under their broker names and its own
// settings, all read-only (startup options); "" (the cluster-wide dynamic
// defaults) has none. ConfigNames keeps only the names listed; synonyms
// (v1+) give a topic config's broker-level default; documentation (v3+)
// is not kept (null).
func (s *Server) describeConfigs(r *kmsg.DescribeConfigsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range r.Resources {
		out := kmsg.NewDescribeConfigsResponseResource()
		out.ResourceType, out.ResourceName = rr.ResourceType, rr.ResourceName
		var entries []kmsg.DescribeConfigsResponseResourceConfig
		var err error
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			entries, err = s.topicConfigs(r, rr.ResourceName)
		case kmsg.ConfigResourceTypeBroker:
			switch rr.ResourceName {
			case "":
				// The cluster-wide dynamic defaults (Kafka's
				// currentDynamicDefaultConfigs): idemlog has none.
			case strconv.Itoa(int(s.opts.NodeID)):
				entries = s.brokerConfigs(r)
			default:
				err = errConfigResource
				msg := "unexpected broker id, expected " + strconv.Itoa(int(s.opts.NodeID)) + " or empty string"
				out.ErrorMessage = &msg
			}
		default:
			err = errConfigResource
			msg := "unsupported resource type"
			out.ErrorMessage = &msg
		}
		if err != nil {
			out.ErrorCode = s.code(kmsg.DescribeConfigs, err)
			if out.ErrorMessage == nil {
				msg := err.Error()
				out.ErrorMessage = &msg
			}
		} else {
			for _, e := range entries {
				// Null or empty: every config (Kafka's buildConfigEntries).
				if len(rr.ConfigNames) == 0 || slices.Contains(rr.ConfigNames, e.Name) {
					out.Configs = append(out.Configs, e)
				}
			}
		}
		resp.Resources = append(resp.Resources, out)
	}
	return resp
}

// topicConfigs is one topic's entries.
func (s *Server) topicConfigs(r *kmsg.DescribeConfigsRequest, topic string) ([]kmsg.DescribeConfigsResponseResourceConfig, error) {
	if err := engine.ValidateTopic(topic); err != nil {
		return nil, err
	}
	cfg, err := s.eng.Frontend().TopicConfig(topic)
	if err != nil {
		return nil, err
	}
	defaults := s.eng.Frontend().DefaultTopicConfig()
	out := make([]kmsg.DescribeConfigsResponseResourceConfig, 0, len(cfg))
	for i, c := range cfg {
		// The source is the first of the topic's override, the engine's
		// setting (a static broker config) and Kafka's default that is
		// set, as Kafka takes the first set synonym's.
		source := engineSource(c)
		if c.Override {
			source = kmsg.ConfigSourceDynamicTopicConfig
		}
		e := configEntry(r, c.Name, c.Value, c.Type, source, false)
		if r.IncludeSynonyms && r.Version >= 1 {
			if c.Override {
				e.ConfigSynonyms = append(e.ConfigSynonyms, synonym(c.Name, c.Value, kmsg.ConfigSourceDynamicTopicConfig))
			}
			if i < len(defaults) && defaults[i].Name == c.Name && c.Broker != "" {
				d := defaults[i]
				e.ConfigSynonyms = append(e.ConfigSynonyms, synonym(c.Broker, d.Value, engineSource(d)))
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// brokerConfigs is the broker's entries, sorted by name.
func (s *Server) brokerConfigs(r *kmsg.DescribeConfigsRequest) []kmsg.DescribeConfigsResponseResourceConfig {
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, c := range s.eng.Frontend().DefaultTopicConfig() {
		if c.Broker == "" {
			continue // a topic-only config (throttles, tiered storage switches)
		}
		out = append(out, configEntry(r, c.Broker, c.Value, c.Type, engineSource(c), true))
	}
	out = append(out,
		configEntry(r, "broker.id", strconv.Itoa(int(s.opts.NodeID)), "INT", kmsg.ConfigSourceStaticBrokerConfig, true),
		configEntry(r, "auto.create.topics.enable", strconv.FormatBool(s.opts.AutoCreateTopics), "BOOLEAN", kmsg.ConfigSourceStaticBrokerConfig, true),
		configEntry(r, "num.partitions", strconv.Itoa(s.opts.DefaultPartitions), "INT", kmsg.ConfigSourceStaticBrokerConfig, true),
	)
	slices.SortFunc(out, func(a, b kmsg.DescribeConfigsResponseResourceConfig) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// engineSource is where the engine's value of c comes from: its Options
// (Kafka's static broker config) or Kafka's default.
func engineSource(c engine.ConfigEntry) kmsg.ConfigSource {
	if c.Configured {
		return kmsg.ConfigSourceStaticBrokerConfig
	}
	return kmsg.ConfigSourceDefaultConfig
}

func configEntry(r *kmsg.DescribeConfigsRequest, name, value, typ string, source kmsg.ConfigSource, readOnly bool) kmsg.DescribeConfigsResponseResourceConfig {
	e := kmsg.NewDescribeConfigsResponseResourceConfig()
	e.Name, e.Value, e.ReadOnly = name, &value, readOnly
	e.IsDefault = source == kmsg.ConfigSourceDefaultConfig // v0's field
	e.Source = source
	if r.Version >= 3 {
		e.ConfigType = configTypes[typ]
	}
	return e
}

func synonym(name, value string, source kmsg.ConfigSource) kmsg.DescribeConfigsResponseResourceConfigConfigSynonym {
	s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
	s.Name, s.Value, s.Source = name, &value, source
	return s
}
