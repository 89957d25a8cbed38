package engine

import (
	"cmp"
	"slices"
	"strconv"
	"time"

	"github.com/idemlog/idemlog/partition"
)

// ConfigEntry is one of a topic's configs as Kafka's DescribeConfigs
// shows it.
type ConfigEntry struct {
	Name  string
	Value string
	// Override: the topic set it (CreateTopics' configs, AlterConfigs);
	// otherwise Value is the engine's.
	Override bool
	// Configured: the engine's value comes from its Options (Kafka's
	// static broker config), not from Kafka's default.
	Configured bool
	// Settable: a topic may set it (every topic config is; kept for
	// callers that show read-only entries).
	Settable bool
	// Type is Kafka's type name for the value: INT, LONG, DOUBLE, STRING,
	// BOOLEAN, LIST.
	Type string
	// Broker is the broker config that gives the default (Kafka's
	// synonym), "" for configs with none.
	Broker string
}

// topicConfig: see Frontend.TopicConfig.
func (e *Engine) topicConfig(topic string) ([]ConfigEntry, error) {
	p, err := e.Partition(topic, 0)
	if err != nil {
		return nil, err
	}
	entries := e.defaultConfig(IsInternalTopic(topic))
	cfg := p.settings.Load().config
	for i := range entries {
		if v, ok := cfg[entries[i].Name]; ok {
			entries[i].Value, entries[i].Override = v, true
		}
	}
	return entries, nil
}

// defaultTopicConfig: see Frontend.DefaultTopicConfig.
func (e *Engine) defaultTopicConfig() []ConfigEntry { return e.defaultConfig(false) }

func (e *Engine) defaultConfig(internal bool) []ConfigEntry {
	o := e.opts.Partition
	ms := func(d time.Duration) string {
		if d < 0 {
			return "-1"
		}
		return strconv.FormatInt(d.Milliseconds(), 10)
	}
	// engine holds the values the engine's Options set, by config name.
	engine := map[string]string{}
	if o.MaxBatchSize > 0 {
		engine["max.message.bytes"] = strconv.Itoa(o.MaxBatchSize)
	}
	if o.RetentionAge != 0 {
		engine["retention.ms"] = ms(o.RetentionAge)
	}
	if o.RetentionBytes > 0 {
		engine["retention.bytes"] = strconv.FormatInt(o.RetentionBytes, 10)
	}
	if o.Segment.MaxBytes > 0 {
		engine["segment.bytes"] = strconv.FormatInt(o.Segment.MaxBytes, 10)
	}
	if o.RollAge != 0 {
		engine["segment.ms"] = ms(o.RollAge)
	}
	if o.Segment.IndexMaxBytes > 0 {
		engine["segment.index.bytes"] = strconv.Itoa(o.Segment.IndexMaxBytes)
	}
	if o.Segment.IndexIntervalBytes > 0 {
		engine["index.interval.bytes"] = strconv.FormatInt(o.Segment.IndexIntervalBytes, 10)
	}
	switch o.Sync.Kind {
	case partition.SyncAlways:
		engine["flush.messages"] = "1"
	case partition.SyncInterval:
		engine["flush.ms"] = strconv.FormatInt(o.Sync.Interval.Milliseconds(), 10)
	}
	// The engine's own flush policy adds to its sync policy: the stricter
	// of the two is what a topic without overrides gets.
	if m := o.Flush.Messages; m > 0 && engine["flush.messages"] != "1" {
		engine["flush.messages"] = strconv.FormatInt(m, 10)
	}
	if d := o.Flush.Interval; d > 0 && o.Sync.Kind != partition.SyncAlways && (o.Sync.Kind != partition.SyncInterval || d < o.Sync.Interval) {
		engine["flush.ms"] = strconv.FormatInt(d.Milliseconds(), 10)
	}
	if internal {
		// The engine's own setting for its internal topics, whatever the
		// options say.
		engine["retention.ms"], engine["retention.bytes"] = "-1", "-1"
		// Compacted, on segments of at most internalSegmentBytes
		// (settingsFor).
		engine["cleanup.policy"] = "compact"
		if o.Segment.MaxBytes <= 0 || o.Segment.MaxBytes > internalSegmentBytes {
			engine["segment.bytes"] = strconv.Itoa(internalSegmentBytes)
		}
	}
	entries := make([]ConfigEntry, 0, len(topicConfigDefs))
	for _, d := range topicConfigDefs {
		c := ConfigEntry{Name: d.name, Value: d.def, Settable: true, Type: string(d.typ), Broker: d.broker}
		if v, ok := engine[d.name]; ok {
			c.Value, c.Configured = v, true
		}
		entries = append(entries, c)
	}
	slices.SortFunc(entries, func(a, b ConfigEntry) int { return cmp.Compare(a.Name, b.Name) })
	return entries
}
