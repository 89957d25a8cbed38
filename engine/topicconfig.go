package engine

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/idemlog/idemlog/internal/fsutil"
	"github.com/idemlog/idemlog/partition"
)

// Per-topic configuration.
//
// A topic may override the engine's partition options with Kafka's topic
// configs (CreateTopics' configs). The overrides are stored in each of the
// topic's partition directories, written before the partition is opened:
//
//	topic.config:  a header line, then one "name=value" line per override,
//	               sorted by name
//
// The header, "# idemlog topic.config version 1 crc32c=XXXXXXXX", carries
// the CRC-32C (Castagnoli) of the lines after it, in 8 hex digits: a
// changed byte could otherwise turn retention.ms=-1 into a retention that
// deletes the topic's records. Every partition has the file, with no
// override lines when the topic has none, so that a lost file is told from
// "no overrides". A file without the header (written before version 1, or
// by hand) is read as it is; a partition last checkpointed before version
// 1 that has none gets an empty one.

const (
	topicConfigFile   = "topic.config"
	topicConfigHeader = "# idemlog topic.config version 1 crc32c="
)

// ConfigError is a refused topic config. Msg is the message Kafka's broker
// gives for it ("Unknown topic config name: x", "Invalid value v for
// configuration n: reason"), so that a Kafka front end can answer with it.
// Err is the sentinel it is (nil: ErrInvalidConfig).
type ConfigError struct {
	Msg string
	Err error
}

func (e *ConfigError) Error() string { return e.Msg }

// Unwrap makes a ConfigError its sentinel for errors.Is and errcode.Code.
func (e *ConfigError) Unwrap() error {
	if e.Err == nil {
		return ErrInvalidConfig
	}
	return e.Err
}

// validateTopicConfig: see Frontend.ValidateTopicConfig.
func validateTopicConfig(cfg map[string]string) error {
	var o partition.Options
	_, err := applyTopicConfig(&o, cfg)
	return err
}

// applyTopicConfig validates cfg and applies it over o, returning the
// settings the engine's append path reads.
func applyTopicConfig(o *partition.Options, cfg map[string]string) (*topicSettings, error) {
	names := make([]string, 0, len(cfg))
	for name := range cfg {
		names = append(names, name)
	}
	// Sorted, so that the first refusal reported is the same every time.
	slices.Sort(names)
	for _, name := range names {
		def, ok := configDefByName[name]
		if !ok {
			return nil, &ConfigError{Msg: "Unknown topic config name: " + name}
		}
		if err := def.check(strings.TrimSpace(cfg[name])); err != nil {
			return nil, &ConfigError{Msg: fmt.Sprintf("Invalid value %s for configuration %s: %v", cfg[name], name, err)}
		}
	}
	if v := strings.TrimSpace(cfg["remote.storage.enable"]); strings.EqualFold(v, "true") {
		return nil, &ConfigError{Msg: "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage."}
	}
	minLag, maxLag := int64(0), int64(math.MaxInt64)
	if v, ok := cfg["min.compaction.lag.ms"]; ok {
		minLag = mustLong(strings.TrimSpace(v))
	}
	if v, ok := cfg["max.compaction.lag.ms"]; ok {
		maxLag = mustLong(strings.TrimSpace(v))
	}
	if minLag > maxLag {
		return nil, &ConfigError{Msg: fmt.Sprintf("conflict topic config setting min.compaction.lag.ms (%d) > max.compaction.lag.ms (%d)", minLag, maxLag)}
	}
	s := &topicSettings{config: cfg, maxBatch: o.MaxBatchSize, tsBefore: math.MaxInt64, tsAfter: math.MaxInt64, clean: defaultCleanSettings}
	for _, name := range names {
		if def := configDefByName[name]; def.apply != nil {
			def.apply(o, s, strings.TrimSpace(cfg[name]))
		}
	}
	// Kafka 3.6-3.9: the deprecated difference bound stands in for a side
	// left at its default.
	if v, ok := cfg["message.timestamp.difference.max.ms"]; ok {
		d := mustLong(strings.TrimSpace(v))
		if _, set := cfg["message.timestamp.before.max.ms"]; !set {
			s.tsBefore = d
		}
		if _, set := cfg["message.timestamp.after.max.ms"]; !set {
			s.tsAfter = d
		}
	}
	return s, nil
}

// topicConfigBytes is the content of a partition's topic.config: the
// checksum header, then one "name=value" line per override (none for a
// topic without overrides: the file exists for every partition, so that a
// lost one is noticed).
func topicConfigBytes(cfg map[string]string) []byte {
	names := make([]string, 0, len(cfg))
	for n := range cfg {
		names = append(names, n)
	}
	slices.Sort(names)
	var b bytes.Buffer
	for _, n := range names {
		fmt.Fprintf(&b, "%s=%s\n", n, strings.TrimSpace(cfg[n]))
	}
	out := fmt.Appendf(nil, "%s%08x\n", topicConfigHeader, crc32.Checksum(b.Bytes(), crc32.MakeTable(crc32.Castagnoli)))
	return append(out, b.Bytes()...)
}

// writeTopicConfig replaces a partition directory's topic.config durably.
func writeTopicConfig(dir string, cfg map[string]string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cannot create partition dir: %w", err)
	}
	return fsutil.WriteFileAtomic(filepath.Join(dir, topicConfigFile), topicConfigBytes(cfg))
}

// openTopicConfig returns a partition directory's overrides for its open.
// A missing file is a lost one unless the partition's recovery point is in
// Kafka's version 0 (written before this code, which writes the file with
// every partition): refused, as the engine's defaults (a retention of 7
// days, say) could delete what the topic's own configs keep. In an older
// partition it means no overrides, and an empty file is written for the
// next open.
func openTopicConfig(dir string) (map[string]string, error) {
	cfg, err := readTopicConfig(dir)
	if err != nil || cfg != nil {
		return cfg, err
	}
	path := filepath.Join(dir, topicConfigFile)
	if fsutil.Exists(path) {
		return cfg, nil
	}
	ck, err := partition.ReadCheckpointFile(filepath.Join(dir, "recovery-point-offset-checkpoint"))
	if err != nil {
		return nil, fmt.Errorf("cannot read topic config: %w", err)
	}
	if ck.Version != 0 {
		// Version 1, or no checkpoint at all (a partition made by this
		// code, never appended to, has none yet), or a damaged one: the
		// file was written with the partition.
		return nil, fmt.Errorf("cannot read topic config: %s is missing, so the topic's overrides (retention, say) are unknown; "+
			"write them again as name=value lines, or create it empty if the topic had none: %w", path, ErrCorruptMetadata)
	}
	if err := writeTopicConfig(dir, nil); err != nil {
		return nil, err
	}
	return nil, fsutil.SyncDir(dir)
}

// readTopicConfig returns a partition directory's overrides (nil if none).
func readTopicConfig(dir string) (map[string]string, error) {
	data, err := fsutil.ReadFileMax(filepath.Join(dir, topicConfigFile), maxMetadataFile)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if errors.Is(err, fsutil.ErrFileTooLarge) {
		return nil, fmt.Errorf("cannot read topic config: %w: %w", ErrCorruptMetadata, err)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read topic config: %w", err)
	}
	if rest, ok := bytes.CutPrefix(data, []byte(topicConfigHeader)); ok {
		hex, body, _ := bytes.Cut(rest, []byte("\n"))
		want, perr := strconv.ParseUint(string(hex), 16, 32)
		got := crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli))
		if perr != nil || len(hex) != 8 || uint32(want) != got {
			return nil, fmt.Errorf("cannot read topic config: %s fails its checksum (%08x, header says %q), so the topic's overrides cannot be trusted; "+
				"restore it, or write them again as name=value lines: %w", filepath.Join(dir, topicConfigFile), got, hex, ErrCorruptMetadata)
		}
		data = body
	}
	cfg := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		name, val, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("cannot parse topic config line %q in %s: %w", line, dir, ErrInvalidConfig)
		}
		cfg[name] = val
	}
	if err := sc.Err(); err != nil {
		// A line past the scanner's limit ended the scan: the overrides
		// after it would be dropped silently.
		return nil, fmt.Errorf("cannot parse topic config in %s: %w: %w", dir, ErrInvalidConfig, err)
	}
	return cfg, nil
}
