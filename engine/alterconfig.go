package engine

import (
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/internal/fsutil"
	"github.com/idemlog/idemlog/partition"
)

// Changing a topic's configs while it is open (Kafka's AlterConfigs and
// IncrementalAlterConfigs).
//
// The new overrides are validated whole (the topic's overrides after the
// change, as Kafka validates the resulting config), written to every
// partition's topic.config, and applied to the open partitions, each
// setting at its next use as Kafka's LogManager.updateTopicConfig does:
// the batch size limit, timestamp rules and flush.* at the next append
// (flush.ms at the flusher's next tick), segment.ms and segment.bytes at
// the next roll check, retention at the next pass. segment.index.bytes and
// index.interval.bytes, which shape the files, apply from the partition's
// next open.
//
// Partition 0's file is the commit point: the other partitions' files are
// written first, and Open makes every partition's file equal to partition
// 0's, so a crash in the middle leaves the topic with the old configs or
// the new, never a mix.

// ConfigOpKind is an IncrementalAlterConfigs operation (Kafka's
// AlterConfigOp.OpType codes).
type ConfigOpKind int8

const (
	ConfigSet      ConfigOpKind = 0 // set the value
	ConfigDelete   ConfigOpKind = 1 // remove the override (a no-op if none)
	ConfigAppend   ConfigOpKind = 2 // add list entries not present (LIST configs)
	ConfigSubtract ConfigOpKind = 3 // remove list entries (LIST configs)
)

// ConfigOp is one change of a topic's configs.
type ConfigOp struct {
	Name  string
	Op    ConfigOpKind
	Value string
}

// incrementalAlterTopicConfig: see Frontend.IncrementalAlterTopicConfig.
func (e *Engine) incrementalAlterTopicConfig(topic string, ops []ConfigOp, validateOnly bool) error {
	return e.alterTopicConfig(topic, validateOnly, func(cur map[string]string) (map[string]string, error) {
		next := maps.Clone(cur)
		if next == nil {
			next = map[string]string{}
		}
		seen := map[string]bool{}
		for _, op := range ops {
			if seen[op.Name] {
				return nil, &ConfigError{Msg: "Error due to duplicate config keys", Err: ErrInvalidConfigRequest}
			}
			seen[op.Name] = true
			def, known := configDefByName[op.Name]
			switch op.Op {
			case ConfigSet:
				next[op.Name] = op.Value
			case ConfigDelete:
				delete(next, op.Name)
			case ConfigAppend, ConfigSubtract:
				if !known {
					return nil, &ConfigError{Msg: "Unknown topic config name: " + op.Name}
				}
				verb := "APPEND"
				if op.Op == ConfigSubtract {
					verb = "SUBTRACT"
				}
				if def.typ != typeList {
					return nil, &ConfigError{Msg: fmt.Sprintf("Can't %s to key %s because its type is not LIST.", verb, op.Name)}
				}
				base, ok := next[op.Name]
				if !ok {
					base = def.def
				}
				list := splitList(base)
				for _, v := range splitList(op.Value) {
					i := slices.Index(list, v)
					switch {
					case op.Op == ConfigAppend && i < 0:
						list = append(list, v)
					case op.Op == ConfigSubtract && i >= 0:
						list = slices.Delete(list, i, i+1)
					}
				}
				next[op.Name] = strings.Join(list, ",")
			default:
				return nil, &ConfigError{Msg: fmt.Sprintf("Unknown operation %d for config %s", op.Op, op.Name), Err: ErrInvalidConfigRequest}
			}
		}
		return next, nil
	})
}

// replaceTopicConfig: see Frontend.ReplaceTopicConfig.
func (e *Engine) replaceTopicConfig(topic string, cfg map[string]string, validateOnly bool) error {
	return e.alterTopicConfig(topic, validateOnly, func(map[string]string) (map[string]string, error) {
		return maps.Clone(cfg), nil
	})
}

func (e *Engine) alterTopicConfig(topic string, validateOnly bool, change func(map[string]string) (map[string]string, error)) error {
	if err := ValidateTopic(topic); err != nil {
		return err
	}
	e.configMu.Lock()
	defer e.configMu.Unlock()
	e.mu.Lock()
	e.waitCreationsLocked(topic) // so that its new partitions get the change
	if e.closed.Load() {
		e.mu.Unlock()
		return ErrClosed
	}
	parts := e.topicPartitionsLocked(topic)
	e.mu.Unlock()
	if len(parts) == 0 {
		return &ConfigError{Msg: fmt.Sprintf("The topic '%s' does not exist.", topic), Err: ErrUnknownTopicOrPartition}
	}
	if IsInternalTopic(topic) {
		// The engine sizes and keeps its internal topics itself.
		return fmt.Errorf("cannot alter the configs of internal topic %q: %w", topic, ErrInvalidTopic)
	}
	cur := parts[0].settings.Load().config
	next, err := change(cur)
	if err != nil {
		return err
	}
	for name, v := range next {
		next[name] = strings.TrimSpace(v)
	}
	if err := validateTopicConfig(next); err != nil {
		return err
	}
	if validateOnly || maps.Equal(cur, next) {
		return nil
	}
	// Without mu: a topic of tens of thousands of partitions takes
	// seconds to write, and nothing else of the engine waits for it. A
	// DeleteTopic meanwhile makes a write fail (its directories are
	// renamed away), which this answers as an error.
	dirs := make([]string, 0, len(parts)-1)
	for _, p := range parts[1:] {
		dirs = append(dirs, p.log.Dir())
	}
	if err := storeTopicConfigs(e.dir, dirs, next); err != nil {
		return fmt.Errorf("cannot alter the configs of %s: %w", topic, err)
	}
	// Partition 0 last, synced: its file decides after a crash
	// (reconcileTopicConfigs).
	if err := storeTopicConfig(parts[0].log.Dir(), next); err != nil {
		return fmt.Errorf("cannot alter the configs of %s-0: %w", topic, err)
	}
	for _, p := range parts {
		if err := p.setConfig(next); err != nil {
			return err
		}
	}
	return nil
}

// storeTopicConfigs replaces the topic.config of every directory of dirs,
// durably, with one syncfs(2) of the data dir's filesystem for many (where
// it makes files durable), else with an fsync of each file and directory.
func storeTopicConfigs(dataDir string, dirs []string, cfg map[string]string) error {
	data := topicConfigBytes(cfg)
	for _, dir := range dirs {
		if err := fsutil.WriteFileNoSync(filepath.Join(dir, topicConfigFile), data); err != nil {
			return err
		}
	}
	return syncNewDirs(dataDir, dirs, map[string][]byte{topicConfigFile: data})
}

// topicPartitionsLocked returns topic's partitions in index order (under
// e.mu).
func (e *Engine) topicPartitionsLocked(topic string) []*Partition {
	all := *e.parts.Load()
	var parts []*Partition
	for i := 0; ; i++ {
		p := all[partitionKey(topic, i)]
		if p == nil {
			return parts
		}
		parts = append(parts, p)
	}
}

// storeTopicConfig replaces a partition directory's topic.config, durably.
// A topic without overrides keeps an empty file: a missing one reads as
// lost (openTopicConfig).
func storeTopicConfig(dir string, cfg map[string]string) error {
	return writeTopicConfig(dir, cfg)
}

// internalSegmentBytes is the segment size of the internal topics, unless
// the engine's is smaller: with 1,000 live keys, an engine open after
// 10 million offset commits replays about 8 MiB (docs/PERFORMANCE.md).
const internalSegmentBytes = 8 << 20

// settingsFor applies a topic's overrides over o (the partition's copy of
// the engine's options) and returns what the append path reads.
func (p *Partition) settingsFor(o *partition.Options, cfg map[string]string) (*topicSettings, error) {
	s, err := applyTopicConfig(o, cfg)
	if err != nil {
		return nil, err
	}
	if s.maxBatch <= 0 {
		s.maxBatch = batch.DefaultMaxBatchSize
	}
	if IsInternalTopic(p.topic) {
		// Only the engine writes them, and a limit meant for clients'
		// batches must not refuse its records: a transaction's decision
		// record is larger than its Ongoing one (a rotation adds the next
		// producer id), and a refused decision would leave the transaction
		// unable to end, pinning its partitions' LSO. A segment still
		// bounds a batch.
		s.maxBatch = math.MaxInt32
		// Kafka compacts the internal topics (cleanup.policy=compact):
		// they stay bounded by their live keys (committed offsets,
		// transactional ids), and deleting their segments by age or size
		// would lose them: retention is off for them.
		o.RetentionAge, o.RetentionBytes = -1, 0
		s.compact = true
		// An open replays an internal topic from its log start: the
		// cleaned segments (a record per live key) and the active one,
		// which the cleaner never touches. Small segments bound that
		// replay (Kafka uses 100 MiB, offsets.topic.segment.bytes, and
		// loads offsets in the background).
		if o.Segment.MaxBytes <= 0 || o.Segment.MaxBytes > internalSegmentBytes {
			o.Segment.MaxBytes = internalSegmentBytes
		}
	}
	if s.compact {
		// Kafka's LogConfig.maxSegmentMs: a compacted log's active
		// segment rolls within max.compaction.lag.ms, so that its records
		// can be cleaned in time (the active segment never is).
		if lag := msDuration(s.clean.maxLagMs); lag > 0 && (o.RollAge <= 0 || lag < o.RollAge) {
			o.RollAge = lag
		}
	}
	return s, nil
}

// setConfig makes cfg the open partition's configs.
func (p *Partition) setConfig(cfg map[string]string) error {
	o := p.opts.Partition
	s, err := p.settingsFor(&o, cfg)
	if err != nil {
		return err
	}
	p.log.SetLimits(partition.Limits{
		RollAge:        o.RollAge,
		SegmentBytes:   o.Segment.MaxBytes,
		RetentionAge:   o.RetentionAge,
		RetentionBytes: o.RetentionBytes,
	})
	if err := p.log.SetFlush(o.Flush); err != nil {
		// Never: the config passed validation, which refuses negatives.
		return fmt.Errorf("cannot apply the configs of %s-%d: %w", p.topic, p.index, err)
	}
	p.settings.Store(s)
	return nil
}

// reconcileTopicConfigs makes every partition's configs its topic's
// partition 0's (at Open): an alteration cut short by a crash wrote some
// partitions' files and not partition 0's, which is the commit point.
func reconcileTopicConfigs(parts map[string]*Partition) error {
	for _, p := range parts {
		if p.index == 0 {
			continue
		}
		p0 := parts[partitionKey(p.topic, 0)]
		if p0 == nil {
			continue
		}
		want := p0.settings.Load().config
		if maps.Equal(p.settings.Load().config, want) {
			continue
		}
		if err := storeTopicConfig(p.log.Dir(), want); err != nil {
			return fmt.Errorf("cannot restore the configs of %s-%d: %w", p.topic, p.index, err)
		}
		if err := p.setConfig(want); err != nil {
			return err
		}
	}
	return nil
}
