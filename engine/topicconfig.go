package engine

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idemlog/idemlog/errcode"
	"github.com/idemlog/idemlog/internal/fsutil"
	"github.com/idemlog/idemlog/partition"
)

// Per-topic configuration.
//
// A topic may override the engine's partition options with Kafka's topic
// configs (CreateTopics' configs). The overrides are stored in each of the
// topic's partition directories, written before the partition is opened:
//
//	topic.config:  one "name=value" line per override, sorted by name
//
// A partition directory without the file uses the engine's options.

const topicConfigFile = "topic.config"

// ErrInvalidConfig: a topic config idemlog does not know, or a value out of
// range (Kafka's INVALID_CONFIG, 40).
var ErrInvalidConfig = errcode.New(40, "invalid topic config")

// topicConfigs are the configs a topic may set and how each applies.
var topicConfigs = map[string]func(o *partition.Options, v int64) error{
	"max.message.bytes": func(o *partition.Options, v int64) error {
		if v < 1 || v > math.MaxInt32 {
			return ErrInvalidConfig
		}
		o.MaxBatchSize = int(v)
		return nil
	},
	"retention.ms": func(o *partition.Options, v int64) error {
		switch {
		case v == -1 || v > maxDurationMs:
			// Past 292 years a Duration overflows (from review: about
			// 584 years wrapped to under a millisecond and deleted
			// everything): that is forever.
			o.RetentionAge = -1
		case v == 0:
			// Kafka's 0: every closed segment whose records are older
			// than now. (0 is the partition's "default" value.)
			o.RetentionAge = 1
		case v > 0:
			o.RetentionAge = time.Duration(v) * time.Millisecond
		default:
			return ErrInvalidConfig
		}
		return nil
	},
	"retention.bytes": func(o *partition.Options, v int64) error {
		switch {
		case v < -1:
			return ErrInvalidConfig
		case v == 0:
			// Kafka's 0 keeps no closed segment; the partition reads 0 as
			// off. One byte is the same while the active segment holds
			// data; right after a roll it keeps the last closed segment
			// until the next append. (From review: 0 kept everything.)
			o.RetentionBytes = 1
		default:
			o.RetentionBytes = v
		}
		return nil
	},
	"segment.bytes": func(o *partition.Options, v int64) error {
		if v < 14 || v > math.MaxInt32 {
			return ErrInvalidConfig // Kafka's own bounds: at least a header, at most 2 GiB
		}
		o.Segment.MaxBytes = v
		return nil
	},
	"segment.ms": func(o *partition.Options, v int64) error {
		if v < 1 {
			return ErrInvalidConfig
		}
		// Long.MAX_VALUE, Kafka's "never", overflowed to -1 ms and rolled
		// at every append. (From review.)
		o.RollAge = time.Duration(min(v, maxDurationMs)) * time.Millisecond
		return nil
	},
}

// maxDurationMs is the most milliseconds a time.Duration holds.
const maxDurationMs = math.MaxInt64 / int64(time.Millisecond)

// ValidateTopicConfig checks a topic's configs: known names, integer
// values in range.
func ValidateTopicConfig(cfg map[string]string) error {
	var o partition.Options
	return applyTopicConfig(&o, cfg)
}

func applyTopicConfig(o *partition.Options, cfg map[string]string) error {
	for name, val := range cfg {
		apply, ok := topicConfigs[name]
		if !ok {
			return fmt.Errorf("cannot set topic config %q: unknown: %w", name, ErrInvalidConfig)
		}
		v, err := strconv.ParseInt(strings.TrimSpace(val), 10, 64)
		if err != nil {
			return fmt.Errorf("cannot set topic config %q to %q: %w", name, val, ErrInvalidConfig)
		}
		if err := apply(o, v); err != nil {
			return fmt.Errorf("cannot set topic config %q to %d: %w", name, v, err)
		}
	}
	return nil
}

// topicConfigBytes is the content of a partition's topic.config, nil
// when there are no overrides (the file is then not written).
func topicConfigBytes(cfg map[string]string) []byte {
	if len(cfg) == 0 {
		return nil
	}
	names := make([]string, 0, len(cfg))
	for n := range cfg {
		names = append(names, n)
	}
	slices.Sort(names)
	var b bytes.Buffer
	for _, n := range names {
		fmt.Fprintf(&b, "%s=%s\n", n, strings.TrimSpace(cfg[n]))
	}
	return b.Bytes()
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
		// after it would be dropped silently. (From review.)
		return nil, fmt.Errorf("cannot parse topic config in %s: %w: %w", dir, ErrInvalidConfig, err)
	}
	return cfg, nil
}
