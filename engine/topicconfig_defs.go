package engine

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/partition"
)

// The topic configs of Kafka 3.9 and 4.x (Kafka's LogConfig and
// TopicConfig): every name a client may send in CreateTopics or
// AlterConfigs, its type, Kafka's default, Kafka's validation and what it
// does on one node.
//
// A config is one of:
//
//	applied   changes what the partition does (retention, rolls, batch size
//	          limit, timestamps, flush policy)
//	accepted  stored and described, and means nothing on a single node
//	          (replication, follower throttles, tiered storage) or is a
//	          no-op for record batch v2 (down-conversion, message format)
//
// Values are validated as Kafka validates them, with Kafka's messages, so
// that tools that show the broker's message (kafka-configs.sh, kadm) read
// the same text: "Invalid value V for configuration N: <reason>".

// configType is Kafka's ConfigDef type, as DescribeConfigs v3+ reports it.
type configType string

const (
	typeBoolean configType = "BOOLEAN"
	typeString  configType = "STRING"
	typeInt     configType = "INT"
	typeLong    configType = "LONG"
	typeDouble  configType = "DOUBLE"
	typeList    configType = "LIST"
)

// topicSettings are the applied configs' effect beyond partition.Options:
// what the engine's append path reads (Partition.settings).
type topicSettings struct {
	// config is the topic's overrides as stored (topic.config).
	config map[string]string
	// maxBatch is max.message.bytes.
	maxBatch int
	// logAppendTime: message.timestamp.type=LogAppendTime.
	logAppendTime bool
	// tsBefore and tsAfter are message.timestamp.before.max.ms and
	// after.max.ms (with difference.max.ms standing in for either left at
	// its default, as Kafka 3.6-3.9 do); math.MaxInt64 checks nothing.
	tsBefore, tsAfter int64
	// compact: cleanup.policy lists compact (always for the internal
	// topics); clean: the compaction configs.
	compact bool
	clean   cleanSettings
	// recompress: compression.type names a codec (not "producer"), codec;
	// levels are compression.gzip.level, lz4 and zstd's, by codec (0: the
	// codec's default).
	recompress bool
	codec      batch.Codec
	levels     [5]int
}

// configDef is one topic config.
type configDef struct {
	name string
	typ  configType
	def  string // Kafka's default, as DescribeConfigs shows it
	// broker is the broker config that sets the default (Kafka's synonym).
	broker string
	// check validates a value (already trimmed) and returns Kafka's reason
	// when it is refused.
	check func(v string) error
	// apply, for applied configs, takes the value (valid) into the
	// options and settings. Nil: accepted only.
	apply func(o *partition.Options, s *topicSettings, v string)
}

// reason is a validation failure's text after "Invalid value V for
// configuration N: ".
type reason string

func (r reason) Error() string { return string(r) }

func parseLong(v string) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, reason("Not a number of type LONG")
	}
	return n, nil
}

func parseInt(v string) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0, reason("Not a number of type INT")
	}
	return n, nil
}

// longAtLeast is a LONG config with Kafka's Range.atLeast.
func longAtLeast(lo int64) func(string) error {
	return func(v string) error {
		n, err := parseLong(v)
		if err == nil && n < lo {
			err = reason(fmt.Sprintf("Value must be at least %d", lo))
		}
		return err
	}
}

// intBetween is an INT config with Kafka's Range.between (or atLeast when
// hi is MaxInt32).
func intBetween(lo, hi int64) func(string) error {
	return func(v string) error {
		n, err := parseInt(v)
		switch {
		case err != nil:
		case n < lo:
			err = reason(fmt.Sprintf("Value must be at least %d", lo))
		case n > hi:
			err = reason(fmt.Sprintf("Value must be no more than %d", hi))
		}
		return err
	}
}

func checkBool(v string) error {
	if !strings.EqualFold(v, "true") && !strings.EqualFold(v, "false") {
		return reason("Expected value to be either true or false")
	}
	return nil
}

func oneOf(values ...string) func(string) error {
	return func(v string) error {
		if !slices.Contains(values, v) {
			return reason("String must be one of: " + strings.Join(values, ", "))
		}
		return nil
	}
}

// listOf checks a comma-separated list whose entries are among values (an
// empty list is valid: cleanup.policy "" means neither).
func listOf(values ...string) func(string) error {
	return func(v string) error {
		for _, e := range splitList(v) {
			if !slices.Contains(values, e) {
				return reason("String must be one of: " + strings.Join(values, ", "))
			}
		}
		return nil
	}
}

// splitList splits a LIST value on commas, trimming entries and dropping
// empty ones, as Kafka's ConfigDef parses lists.
func splitList(v string) []string {
	var out []string
	for e := range strings.SplitSeq(v, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// throttledReplicas is the syntax of the two throttled-replica lists:
// "*" or "partition:broker" pairs.
var throttledReplicas = regexp.MustCompile(`^(\*|[0-9]+:[0-9]+)$`)

func checkThrottledReplicas(v string) error {
	entries := splitList(v)
	for _, e := range entries {
		if !throttledReplicas.MatchString(e) || (e == "*" && len(entries) > 1) {
			return reason("Must be a comma-separated list of [partitionId]:[brokerId] pairs, or the wildcard '*'")
		}
	}
	return nil
}

// messageFormatVersion is the shape of a Kafka release or metadata
// version ("2.8", "3.0-IV1", "0.10.2"): the config is ignored for record
// batch v2 and removed in Kafka 4.0.
var messageFormatVersion = regexp.MustCompile(`^[0-9]+\.[0-9]+(\.[0-9]+)?(-IV[0-9]+)?$`)

func checkFormatVersion(v string) error {
	if !messageFormatVersion.MatchString(v) {
		return reason(fmt.Sprintf("Version `%s` is not a valid version", v))
	}
	return nil
}

func checkRatio(v string) error {
	f, err := strconv.ParseFloat(v, 64)
	switch {
	case err != nil || math.IsNaN(f):
		return reason("Not a number of type DOUBLE")
	case f < 0:
		return reason("Value must be at least 0.0")
	case f > 1:
		return reason("Value must be no more than 1.0")
	}
	return nil
}

func checkGzipLevel(v string) error {
	n, err := parseInt(v)
	if err == nil && n != -1 && (n < 1 || n > 9) {
		err = reason("Value must be between 1 and 9 or equal to -1")
	}
	return err
}

// minPositive is the smaller of a and b, where 0 stands for "none".
func minPositive(a, b int64) int64 {
	if a <= 0 {
		return b
	}
	return min(a, b)
}

// mustLong parses a value check has accepted.
func mustLong(v string) int64 {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		panic(fmt.Sprintf("BUG: config value %q passed validation: %v", v, err))
	}
	return n
}

// maxDurationMs is the most milliseconds a time.Duration holds.
const maxDurationMs = math.MaxInt64 / int64(time.Millisecond)

const longMax = "9223372036854775807"

// topicConfigDefs is every topic config, sorted by name.
var topicConfigDefs = []configDef{
	{name: "cleanup.policy", typ: typeList, def: "delete", broker: "log.cleanup.policy",
		check: listOf("compact", "delete"),
		apply: func(o *partition.Options, s *topicSettings, v string) {
			// Without delete, nothing leaves the log by age or size: a
			// compacted topic keeps (at least) the newest record of every
			// key for good.
			if !slices.Contains(splitList(v), "delete") {
				o.RetentionAge, o.RetentionBytes = -1, 0
			}
			s.compact = slices.Contains(splitList(v), "compact")
		}},
	{name: "compression.gzip.level", typ: typeInt, def: "-1", broker: "compression.gzip.level", check: checkGzipLevel,
		apply: func(_ *partition.Options, s *topicSettings, v string) { s.levels[batch.CodecGzip] = int(mustLong(v)) }},
	{name: "compression.lz4.level", typ: typeInt, def: "9", broker: "compression.lz4.level", check: intBetween(1, 17),
		apply: func(_ *partition.Options, s *topicSettings, v string) { s.levels[batch.CodecLZ4] = int(mustLong(v)) }},
	{name: "compression.type", typ: typeString, def: "producer", broker: "compression.type",
		check: oneOf("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
		apply: func(_ *partition.Options, s *topicSettings, v string) {
			s.recompress = v != "producer"
			switch v {
			case "gzip":
				s.codec = batch.CodecGzip
			case "snappy":
				s.codec = batch.CodecSnappy
			case "lz4":
				s.codec = batch.CodecLZ4
			case "zstd":
				s.codec = batch.CodecZstd
			default:
				s.codec = batch.CodecNone
			}
		}},
	{name: "compression.zstd.level", typ: typeInt, def: "3", broker: "compression.zstd.level", check: intBetween(-131072, 22),
		apply: func(_ *partition.Options, s *topicSettings, v string) { s.levels[batch.CodecZstd] = int(mustLong(v)) }},
	{name: "delete.retention.ms", typ: typeLong, def: "86400000", broker: "log.cleaner.delete.retention.ms", check: longAtLeast(0),
		apply: func(_ *partition.Options, s *topicSettings, v string) { s.clean.deleteRetentionMs = mustLong(v) }},
	{name: "file.delete.delay.ms", typ: typeLong, def: "60000", broker: "log.segment.delete.delay.ms", check: longAtLeast(0)},
	{name: "flush.messages", typ: typeLong, def: longMax, broker: "log.flush.interval.messages", check: longAtLeast(1),
		apply: func(o *partition.Options, _ *topicSettings, v string) {
			// Kafka's rule: an append that leaves this many messages
			// unflushed syncs before it is acknowledged; 1 is the always
			// policy. Long.MAX_VALUE, the default, never does. The flush
			// policy adds syncs to the engine's, never removes any
			// (partition.FlushPolicy).
			if n := mustLong(v); n < math.MaxInt64 {
				o.Flush.Messages = minPositive(o.Flush.Messages, n)
			}
		}},
	{name: "flush.ms", typ: typeLong, def: longMax, broker: "log.flush.interval.ms", check: longAtLeast(0),
		apply: func(o *partition.Options, _ *topicSettings, v string) {
			switch ms := mustLong(v); {
			case ms >= maxDurationMs:
				// Past 292 years, and Long.MAX_VALUE (the default): never.
			case ms == 0:
				// A sync as soon as anything is unflushed: before every
				// acknowledgement.
				o.Flush.Messages = 1
			default:
				d := time.Duration(ms) * time.Millisecond
				if o.Flush.Interval == 0 || d < o.Flush.Interval {
					o.Flush.Interval = d
				}
			}
		}},
	{name: "follower.replication.throttled.replicas", typ: typeList, def: "", broker: "", check: checkThrottledReplicas},
	{name: "index.interval.bytes", typ: typeInt, def: "4096", broker: "log.index.interval.bytes", check: intBetween(0, math.MaxInt32),
		apply: func(o *partition.Options, _ *topicSettings, v string) {
			// 0 indexes every batch; the segment reads 0 as its default.
			o.Segment.IndexIntervalBytes = max(mustLong(v), 1)
		}},
	{name: "leader.replication.throttled.replicas", typ: typeList, def: "", broker: "", check: checkThrottledReplicas},
	{name: "local.retention.bytes", typ: typeLong, def: "-2", broker: "log.local.retention.bytes", check: longAtLeast(-2)},
	{name: "local.retention.ms", typ: typeLong, def: "-2", broker: "log.local.retention.ms", check: longAtLeast(-2)},
	{name: "max.compaction.lag.ms", typ: typeLong, def: longMax, broker: "log.cleaner.max.compaction.lag.ms", check: longAtLeast(1),
		apply: func(_ *partition.Options, s *topicSettings, v string) { s.clean.maxLagMs = mustLong(v) }},
	{name: "max.message.bytes", typ: typeInt, def: "1048588", broker: "message.max.bytes", check: intBetween(0, math.MaxInt32),
		apply: func(o *partition.Options, s *topicSettings, v string) {
			// 0 refuses every batch, as in Kafka; the options read 0 as
			// their default, so the smallest positive limit stands in.
			o.MaxBatchSize = int(max(mustLong(v), 1))
			s.maxBatch = o.MaxBatchSize
		}},
	{name: "message.downconversion.enable", typ: typeBoolean, def: "true", broker: "log.message.downconversion.enable", check: checkBool},
	{name: "message.format.version", typ: typeString, def: "3.0-IV1", broker: "log.message.format.version", check: checkFormatVersion},
	{name: "message.timestamp.after.max.ms", typ: typeLong, def: longMax, broker: "log.message.timestamp.after.max.ms", check: longAtLeast(0),
		apply: func(_ *partition.Options, s *topicSettings, v string) { s.tsAfter = mustLong(v) }},
	{name: "message.timestamp.before.max.ms", typ: typeLong, def: longMax, broker: "log.message.timestamp.before.max.ms", check: longAtLeast(0),
		apply: func(_ *partition.Options, s *topicSettings, v string) { s.tsBefore = mustLong(v) }},
	{name: "message.timestamp.difference.max.ms", typ: typeLong, def: longMax, broker: "log.message.timestamp.difference.max.ms", check: longAtLeast(0)},
	{name: "message.timestamp.type", typ: typeString, def: "CreateTime", broker: "log.message.timestamp.type",
		check: oneOf("CreateTime", "LogAppendTime"),
		apply: func(_ *partition.Options, s *topicSettings, v string) { s.logAppendTime = v == "LogAppendTime" }},
	{name: "min.cleanable.dirty.ratio", typ: typeDouble, def: "0.5", broker: "log.cleaner.min.cleanable.ratio", check: checkRatio,
		apply: func(_ *partition.Options, s *topicSettings, v string) {
			s.clean.dirtyRatio, _ = strconv.ParseFloat(v, 64)
		}},
	{name: "min.compaction.lag.ms", typ: typeLong, def: "0", broker: "log.cleaner.min.compaction.lag.ms", check: longAtLeast(0),
		apply: func(_ *partition.Options, s *topicSettings, v string) { s.clean.minLagMs = mustLong(v) }},
	{name: "min.insync.replicas", typ: typeInt, def: "1", broker: "min.insync.replicas", check: intBetween(1, math.MaxInt32)},
	{name: "preallocate", typ: typeBoolean, def: "false", broker: "log.preallocate", check: checkBool},
	{name: "remote.log.copy.disable", typ: typeBoolean, def: "false", broker: "", check: checkBool},
	{name: "remote.log.delete.on.disable", typ: typeBoolean, def: "false", broker: "", check: checkBool},
	{name: "remote.storage.enable", typ: typeBoolean, def: "false", broker: "", check: checkBool},
	{name: "retention.bytes", typ: typeLong, def: "-1", broker: "log.retention.bytes", check: func(v string) error { _, err := parseLong(v); return err },
		apply: func(o *partition.Options, _ *topicSettings, v string) {
			switch n := mustLong(v); {
			case n < 0:
				o.RetentionBytes = 0 // off
			case n == 0:
				// Kafka's 0 keeps no closed segment; the partition reads 0
				// as off. One byte is the same while the active segment
				// holds data; right after a roll it keeps the last closed
				// segment until the next append.
				o.RetentionBytes = 1
			default:
				o.RetentionBytes = n
			}
		}},
	{name: "retention.ms", typ: typeLong, def: "604800000", broker: "log.retention.ms", check: longAtLeast(-1),
		apply: func(o *partition.Options, _ *topicSettings, v string) {
			switch n := mustLong(v); {
			case n == -1 || n > maxDurationMs:
				// Past 292 years a Duration overflows: that is forever.
				o.RetentionAge = -1
			case n == 0:
				// Kafka's 0: every closed segment whose records are older
				// than now. (0 is the partition's "default" value.)
				o.RetentionAge = 1
			default:
				o.RetentionAge = time.Duration(n) * time.Millisecond
			}
		}},
	// segment.bytes keeps Kafka 3.9's minimum (14, a batch header); 4.0
	// raised it to 1 MiB, which would refuse the small segments that
	// tests and retention-bounded benches use.
	{name: "segment.bytes", typ: typeInt, def: "1073741824", broker: "log.segment.bytes", check: intBetween(14, math.MaxInt32),
		apply: func(o *partition.Options, _ *topicSettings, v string) { o.Segment.MaxBytes = mustLong(v) }},
	{name: "segment.index.bytes", typ: typeInt, def: "10485760", broker: "log.index.size.max.bytes", check: intBetween(4, math.MaxInt32),
		apply: func(o *partition.Options, _ *topicSettings, v string) { o.Segment.IndexMaxBytes = int(mustLong(v)) }},
	{name: "segment.jitter.ms", typ: typeLong, def: "0", broker: "log.roll.jitter.ms", check: longAtLeast(0)},
	{name: "segment.ms", typ: typeLong, def: "604800000", broker: "log.roll.ms", check: longAtLeast(1),
		apply: func(o *partition.Options, _ *topicSettings, v string) {
			// Long.MAX_VALUE, Kafka's "never", must not overflow the
			// Duration into a negative age that rolls at every append.
			o.RollAge = time.Duration(min(mustLong(v), maxDurationMs)) * time.Millisecond
		}},
	{name: "unclean.leader.election.enable", typ: typeBoolean, def: "false", broker: "unclean.leader.election.enable", check: checkBool},
}

// configDefByName indexes topicConfigDefs.
var configDefByName = func() map[string]*configDef {
	m := make(map[string]*configDef, len(topicConfigDefs))
	for i := range topicConfigDefs {
		m[topicConfigDefs[i].name] = &topicConfigDefs[i]
	}
	return m
}()
