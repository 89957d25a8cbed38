package engine

import (
	"cmp"
	"slices"
	"strconv"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/segment"
)

// ConfigEntry is one of a topic's configs as Kafka's DescribeConfigs
// shows it.
type ConfigEntry struct {
	Name  string
	Value string
	// Override: the topic set it (CreateTopics' configs); otherwise Value
	// is the engine's.
	Override bool
	// Configured: the engine's value comes from its Options (Kafka's
	// static broker config), not from Kafka's default.
	Configured bool
	// Settable: a topic may set it at creation (ValidateTopicConfig);
	// the others describe fixed behaviour of the engine.
	Settable bool
	// Type is Kafka's type name for the value: INT, LONG, STRING, BOOLEAN.
	Type string
}

// TopicConfig returns a topic's configs, sorted by name: those a topic may
// set, with the topic's value or the engine's, and the fixed ones that
// say how the engine treats every topic (deletion, never compaction;
// producers' compression and timestamps kept; one replica). Internal
// topics show their retention off, as they keep it.
func (e *Engine) TopicConfig(topic string) ([]ConfigEntry, error) {
	p, err := e.Partition(topic, 0)
	if err != nil {
		return nil, err
	}
	entries := e.defaultConfig(IsInternalTopic(topic))
	for i := range entries {
		if v, ok := p.config[entries[i].Name]; ok {
			entries[i].Value, entries[i].Override = v, true
		}
	}
	return entries, nil
}

// DefaultTopicConfig returns what TopicConfig shows for a topic that sets
// nothing: the engine's own values, sorted by name.
func (e *Engine) DefaultTopicConfig() []ConfigEntry { return e.defaultConfig(false) }

func (e *Engine) defaultConfig(internal bool) []ConfigEntry {
	o := e.opts.Partition
	ms := func(d time.Duration, def time.Duration) string {
		switch {
		case d < 0:
			return "-1"
		case d == 0:
			d = def
		}
		return strconv.FormatInt(d.Milliseconds(), 10)
	}
	orDefault := func(v, def int64) string {
		if v <= 0 {
			v = def
		}
		return strconv.FormatInt(v, 10)
	}
	retentionBytes := "-1"
	if o.RetentionBytes > 0 {
		retentionBytes = strconv.FormatInt(o.RetentionBytes, 10)
	}
	retentionMs := ms(o.RetentionAge, 7*24*time.Hour)
	retentionSet := o.RetentionAge != 0
	if internal {
		// The engine's own setting for its internal topics, whatever the
		// options say.
		retentionMs, retentionBytes, retentionSet = "-1", "-1", true
	}
	entries := []ConfigEntry{
		{Name: "max.message.bytes", Value: orDefault(int64(o.MaxBatchSize), batch.DefaultMaxBatchSize), Settable: true, Type: "INT", Configured: o.MaxBatchSize > 0},
		{Name: "retention.ms", Value: retentionMs, Settable: true, Type: "LONG", Configured: retentionSet},
		{Name: "retention.bytes", Value: retentionBytes, Settable: true, Type: "LONG", Configured: o.RetentionBytes > 0 || internal},
		{Name: "segment.bytes", Value: orDefault(o.Segment.MaxBytes, segment.DefaultMaxBytes), Settable: true, Type: "INT", Configured: o.Segment.MaxBytes > 0},
		{Name: "segment.ms", Value: ms(o.RollAge, 7*24*time.Hour), Settable: true, Type: "LONG", Configured: o.RollAge != 0},
		{Name: "segment.index.bytes", Value: orDefault(int64(o.Segment.IndexMaxBytes), segment.DefaultIndexMaxBytes), Type: "INT", Configured: o.Segment.IndexMaxBytes > 0},
		{Name: "index.interval.bytes", Value: orDefault(o.Segment.IndexIntervalBytes, segment.DefaultIndexIntervalBytes), Type: "INT", Configured: o.Segment.IndexIntervalBytes > 0},
		{Name: "cleanup.policy", Value: "delete", Type: "LIST"},
		{Name: "compression.type", Value: "producer", Type: "STRING"},
		{Name: "message.timestamp.type", Value: "CreateTime", Type: "STRING"},
		{Name: "min.insync.replicas", Value: "1", Type: "INT"},
		{Name: "unclean.leader.election.enable", Value: "false", Type: "BOOLEAN"},
	}
	slices.SortFunc(entries, func(a, b ConfigEntry) int { return cmp.Compare(a.Name, b.Name) })
	return entries
}
