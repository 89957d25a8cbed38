package engine

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
)

// TestTopicConfigValidation: every topic config of Kafka is known, its
// default is valid, and values Kafka refuses are refused with Kafka's
// message.
func TestTopicConfigValidation(t *testing.T) {
	t.Parallel()
	for _, d := range topicConfigDefs {
		if err := validateTopicConfig(map[string]string{d.name: d.def}); err != nil {
			t.Errorf("%s's default %q: %v", d.name, d.def, err)
		}
	}
	for _, name := range []string{
		"cleanup.policy", "compression.type", "message.timestamp.type", "min.insync.replicas",
		"unclean.leader.election.enable", "min.cleanable.dirty.ratio", "delete.retention.ms",
		"message.downconversion.enable", "follower.replication.throttled.replicas", "preallocate",
	} {
		if configDefByName[name] == nil {
			t.Errorf("%s: unknown", name)
		}
	}
	refused := []struct {
		cfg map[string]string
		msg string
	}{
		{map[string]string{"no.such": "1"}, "Unknown topic config name: no.such"},
		{map[string]string{"retention.ms": "x"}, "Invalid value x for configuration retention.ms: Not a number of type LONG"},
		{map[string]string{"retention.ms": "-2"}, "Invalid value -2 for configuration retention.ms: Value must be at least -1"},
		{map[string]string{"max.message.bytes": "2147483648"}, "Invalid value 2147483648 for configuration max.message.bytes: Not a number of type INT"},
		{map[string]string{"segment.bytes": "13"}, "Invalid value 13 for configuration segment.bytes: Value must be at least 14"},
		{map[string]string{"preallocate": "yes"}, "Invalid value yes for configuration preallocate: Expected value to be either true or false"},
		{map[string]string{"compression.type": "GZIP"}, "Invalid value GZIP for configuration compression.type: String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"},
		{map[string]string{"cleanup.policy": "compact,remove"}, "Invalid value compact,remove for configuration cleanup.policy: String must be one of: compact, delete"},
		{map[string]string{"min.cleanable.dirty.ratio": "1.5"}, "Invalid value 1.5 for configuration min.cleanable.dirty.ratio: Value must be no more than 1.0"},
		{map[string]string{"compression.gzip.level": "10"}, "Invalid value 10 for configuration compression.gzip.level: Value must be between 1 and 9 or equal to -1"},
		{map[string]string{"compression.zstd.level": "23"}, "Invalid value 23 for configuration compression.zstd.level: Value must be no more than 22"},
		{map[string]string{"message.timestamp.type": "createtime"}, "Invalid value createtime for configuration message.timestamp.type: String must be one of: CreateTime, LogAppendTime"},
		{map[string]string{"leader.replication.throttled.replicas": "0:1,x"}, "Invalid value 0:1,x for configuration leader.replication.throttled.replicas: Must be a comma-separated list of [partitionId]:[brokerId] pairs, or the wildcard '*'"},
		{map[string]string{"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"},
		{map[string]string{"remote.storage.enable": "true"}, "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage."},
	}
	for _, c := range refused {
		err := validateTopicConfig(c.cfg)
		var ce *ConfigError
		if !errors.Is(err, ErrInvalidConfig) || !errors.As(err, &ce) || ce.Msg != c.msg {
			t.Errorf("%v: %v, want %q", c.cfg, err, c.msg)
		}
	}
	accepted := []map[string]string{
		{"cleanup.policy": "compact,delete"}, {"cleanup.policy": ""}, {"cleanup.policy": " delete "},
		{"retention.bytes": "-5"}, {"max.message.bytes": "0"}, {"preallocate": "TRUE"},
		{"follower.replication.throttled.replicas": "*"}, {"message.format.version": "2.8"},
		{"min.compaction.lag.ms": "5", "max.compaction.lag.ms": "5"}, {"compression.zstd.level": "-131072"},
	}
	for _, cfg := range accepted {
		if err := validateTopicConfig(cfg); err != nil {
			t.Errorf("%v: %v", cfg, err)
		}
	}
}

func configOf(t *testing.T, e *Engine, topic string) map[string]string {
	t.Helper()
	p, err := e.Partition(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	return p.settings.Load().config
}

// TestIncrementalAlterTopicConfig: Kafka's SET, DELETE, APPEND and
// SUBTRACT, each resource all or nothing, validate-only storing nothing,
// and the result kept across a reopen.
func TestIncrementalAlterTopicConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	if err := e.CreateTopic("t", 3, map[string]string{"retention.ms": "60000"}); err != nil {
		t.Fatal(err)
	}
	alter := func(validateOnly bool, ops ...ConfigOp) error {
		return e.incrementalAlterTopicConfig("t", ops, validateOnly)
	}
	if err := alter(false,
		ConfigOp{Name: "cleanup.policy", Op: ConfigAppend, Value: "compact"},
		ConfigOp{Name: "retention.ms", Op: ConfigDelete},
		ConfigOp{Name: "segment.ms", Op: ConfigSet, Value: "1000"},
		ConfigOp{Name: "max.message.bytes", Op: ConfigDelete}, // not set: a no-op
	); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"cleanup.policy": "delete,compact", "segment.ms": "1000"}
	if got := configOf(t, e, "t"); !maps.Equal(got, want) {
		t.Fatalf("after SET/DELETE/APPEND: %v, want %v", got, want)
	}
	// SUBTRACT may leave "", kept as an override.
	if err := alter(false, ConfigOp{Name: "cleanup.policy", Op: ConfigSubtract, Value: "delete,compact"}); err != nil {
		t.Fatal(err)
	}
	want["cleanup.policy"] = ""
	if got := configOf(t, e, "t"); !maps.Equal(got, want) {
		t.Fatalf("after SUBTRACT: %v, want %v", got, want)
	}
	// One bad entry: nothing of the resource changes.
	for _, bad := range [][]ConfigOp{
		{{Name: "segment.ms", Op: ConfigSet, Value: "5"}, {Name: "retention.ms", Op: ConfigSet, Value: "-9"}},
		{{Name: "segment.ms", Op: ConfigSet, Value: "5"}, {Name: "segment.ms", Op: ConfigSet, Value: "6"}},
		{{Name: "segment.ms", Op: ConfigAppend, Value: "5"}},
		{{Name: "segment.ms", Op: 9, Value: "5"}},
	} {
		if err := alter(false, bad...); err == nil {
			t.Fatalf("%v: accepted", bad)
		}
		if got := configOf(t, e, "t"); !maps.Equal(got, want) {
			t.Fatalf("%v: configs changed to %v", bad, got)
		}
	}
	err := alter(false, ConfigOp{Name: "segment.ms", Op: ConfigSet, Value: "1"}, ConfigOp{Name: "segment.ms", Op: ConfigDelete})
	if !errors.Is(err, ErrInvalidConfigRequest) {
		t.Fatalf("a key named twice: %v, want ErrInvalidConfigRequest", err)
	}
	err = alter(false, ConfigOp{Name: "segment.ms", Op: ConfigAppend, Value: "5"})
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Msg != "Can't APPEND to key segment.ms because its type is not LIST." {
		t.Fatalf("APPEND to a LONG: %v", err)
	}
	if err := alter(true, ConfigOp{Name: "segment.ms", Op: ConfigSet, Value: "7"}); err != nil {
		t.Fatal(err)
	}
	if got := configOf(t, e, "t"); !maps.Equal(got, want) {
		t.Fatalf("validate only stored %v", got)
	}
	if err := e.incrementalAlterTopicConfig("missing", nil, false); !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatalf("unknown topic: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openEngine(t, dir, Options{})
	defer e.Close()
	for i := range 3 {
		p, _ := e.Partition("t", i)
		if got := p.settings.Load().config; !maps.Equal(got, want) {
			t.Fatalf("partition %d after reopen: %v, want %v", i, got, want)
		}
	}
	// AlterConfigs replaces: what it does not list is gone.
	if err := e.replaceTopicConfig("t", map[string]string{"retention.bytes": "100"}, false); err != nil {
		t.Fatal(err)
	}
	if got := configOf(t, e, "t"); !maps.Equal(got, map[string]string{"retention.bytes": "100"}) {
		t.Fatalf("after replace: %v", got)
	}
	if err := e.replaceTopicConfig("t", nil, false); err != nil {
		t.Fatal(err)
	}
	if cfg, err := readTopicConfig(filepath.Join(dir, "t-1")); err != nil || len(cfg) != 0 {
		t.Fatalf("no overrides left, yet topic.config holds %v (%v)", cfg, err)
	}
}

// TestAlterTopicConfigApplies: a change takes effect on the open topic at
// its next use, without a reopen: max.message.bytes at the next append,
// segment.bytes at the next roll check, retention.ms at the next pass.
func TestAlterTopicConfigApplies(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_000_000_000)
	e := openEngine(t, t.TempDir(), Options{Now: func() time.Time { return now }})
	defer e.Close()
	if err := e.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	p, _ := e.Partition("t", 0)
	b := idem(t, -1, -1, -1, 10, now.UnixMilli())
	if _, err := p.Append(b); err != nil {
		t.Fatal(err)
	}
	set := func(name, value string) {
		t.Helper()
		if err := e.incrementalAlterTopicConfig("t", []ConfigOp{{Name: name, Op: ConfigSet, Value: value}}, false); err != nil {
			t.Fatal(err)
		}
	}
	set("max.message.bytes", "50")
	if _, err := p.Append(b); !errors.Is(err, batch.ErrTooLarge) {
		t.Fatalf("after max.message.bytes=50: %v, want ErrTooLarge", err)
	}
	set("max.message.bytes", "100000")
	set("segment.bytes", "200")
	for range 5 {
		if _, err := p.Append(b); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(p.log.SegmentBases()); n < 3 {
		t.Fatalf("segment.bytes=200 (batches of %d bytes): %d segments", len(b), n)
	}
	now = now.Add(time.Hour)
	if n, err := p.log.ApplyRetention(); err != nil || n != 0 {
		t.Fatalf("retention at the default: %d deleted, %v", n, err)
	}
	set("retention.ms", "1000")
	if n, err := p.log.ApplyRetention(); err != nil || n == 0 {
		t.Fatalf("retention.ms=1000 an hour later: %d deleted, %v", n, err)
	}
}

// TestAlterTopicConfigCrash: an alteration cut short after some
// partitions' files were written and before partition 0's (the commit
// point) reopens with partition 0's configs everywhere.
func TestAlterTopicConfigCrash(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	if err := e.CreateTopic("t", 3, map[string]string{"retention.ms": "60000"}); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	// What alterTopicConfig leaves when it stops after partition 2's and
	// 1's files: partition 0 still has the old configs.
	half := map[string]string{"retention.ms": "5000", "segment.ms": "99"}
	for _, key := range []string{"t-2", "t-1"} {
		if err := storeTopicConfig(filepath.Join(dir, key), half); err != nil {
			t.Fatal(err)
		}
	}
	e = openEngine(t, dir, Options{})
	defer e.Close()
	want := map[string]string{"retention.ms": "60000"}
	for i := range 3 {
		p, _ := e.Partition("t", i)
		if got := p.settings.Load().config; !maps.Equal(got, want) {
			t.Fatalf("partition %d: %v, want %v", i, got, want)
		}
		if cfg, err := readTopicConfig(filepath.Join(dir, partitionKey("t", i))); err != nil || !maps.Equal(cfg, want) {
			t.Fatalf("partition %d's file: %v, %v", i, cfg, err)
		}
	}
}

// TestOffsetsDoNotWaitForTopicOperations: group and offset requests must
// not wait for the engine's topic lock. The consumer-offsets store took it
// to read the closed flag, so a config change of a topic of 65,535
// partitions (minutes of file writes under that lock) stalled every
// OffsetFetch, commit and group request behind it, until the listener's
// connections ran out.
func TestOffsetsDoNotWaitForTopicOperations(t *testing.T) {
	t.Parallel()
	e := openEngine(t, t.TempDir(), Options{})
	defer e.Close()
	if err := e.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	tp := TopicPartition{Topic: "t", Partition: 0}
	if err := e.Frontend().CommitOffsets("g", map[TopicPartition]OffsetAndMetadata{tp: {Offset: 5}}); err != nil {
		t.Fatal(err)
	}
	e.mu.Lock() // a long topic operation
	done := make(chan error, 1)
	go func() {
		got, err := e.fetchOffsets("g", []TopicPartition{tp}, false)
		if err == nil && got[tp].Offset != 5 {
			err = fmt.Errorf("offset %d, want 5", got[tp].Offset)
		}
		done <- err
	}()
	select {
	case err := <-done:
		e.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		e.mu.Unlock()
		t.Fatal("FetchOffsets waited for the engine's topic lock")
	}
}
