package bench

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/idemlog/idemlog/batch"
)

// ErrUsage marks a workload that cannot run as described: a bad flag value
// or a contradiction. The command line maps it to exit status 2.
var ErrUsage = errors.New("invalid workload")

// ErrUnavailable marks a workload that needs a feature idemlog does not have
// yet. The command line maps it to exit status 2 as well.
var ErrUnavailable = errors.New("not available yet")

// Limits on the workload, so that a typing mistake fails at once instead of
// exhausting memory: each producer holds about 250 KB of histograms and a
// payload pool, and a batch is built in memory.
const (
	MaxProducers  = 1024
	MaxReaders    = 1024
	MaxPartitions = 10000
	MaxRecordSize = 16 << 20
	MaxBatchBytes = 64 << 20
)

// DefaultDuration is how long a run lasts when neither Duration nor Records
// is set.
const DefaultDuration = 10 * time.Second

// DefaultSlice is the length of an interleaved run's slices: short enough
// that a 3 s run has some 60-100 pairs for the median (the median's
// spread shrinks with their square root: 100 ms slices gave 23 pairs, and
// medians 0.64-0.79 over six runs on a loaded machine), and long enough
// that parking the producers between slices is a small part of each. The
// machine's idle time is counted in /proc/stat's 10 ms ticks, coarse
// against a slice, but it is near zero where the ratio needs it most (a
// busy machine), and the median over many pairs evens out the rest.
const DefaultSlice = 25 * time.Millisecond

// DefaultSegmentBytes and DefaultRetentionBytes bound the default run in
// bytes: at most partitions x 160 MiB of segments on disk at once.
const (
	DefaultSegmentBytes   = 32 << 20
	DefaultRetentionBytes = 128 << 20
)

// RetentionEvery is how often a run with RetentionBytes applies it.
const RetentionEvery = 20 * time.Millisecond

// Config is a workload. The zero value is not valid; start from Defaults.
type Config struct {
	Producers  int    // producer goroutines; producer i writes partition i % Partitions
	Partitions int    // partitions of the topic
	RecordSize int    // bytes of each record's value (keys are null)
	Batch      int    // records per batch
	Codec      string // none, gzip, snappy, lz4, zstd
	Fsync      string // never, always, interval=DUR, bytes=N
	Mode       string // plain, idempotent, transactional
	TxnBatches int    // batches per transaction (transactional mode)
	// Duration and Records end the run; at most one may be set, and with
	// neither the run lasts DefaultDuration. Records is the total over all
	// producers.
	Duration time.Duration
	Records  int64
	// Readers tail the partitions from offset 0 during the run, with
	// Isolation is the readers' level: read_uncommitted reads up to the
	// high watermark, read_committed below the last stable offset with
	// aborted transactions hidden.
	Readers   int
	Isolation string
	// Dir is the data directory; "" means a fresh temporary directory,
	// removed when the run ends. A given one is kept, and reopened (and
	// recovered, if it was not closed cleanly) if it exists.
	Dir   string
	Topic string
	// SegmentBytes is segment.bytes (0: the engine's default, 1 GiB).
	SegmentBytes int64
	// RetentionBytes is retention.bytes per partition (0: none), applied
	// every RetentionEvery during the run: the steady state of a log
	// that deletes as fast as it writes (under fsync always, rolls then
	// reuse the deleted segments' files).
	RetentionBytes int64
	Payload        string // text (compressible words) or random
	Seed           int64  // seeds the payload generator
	// BaselineMax bounds each of the baseline's informative figures,
	// measured after the run; 0 skips the baseline altogether, slices
	// included.
	BaselineMax time.Duration
	// Slice is the length of the engine's slices, each followed by a
	// baseline slice as long (interleaved.run); 0 measures the baseline
	// after the run instead, in one block (the figure then follows
	// whatever the machine does between the two).
	Slice time.Duration

	// Outputs: these do not change the workload; they are part of the
	// report so that it says how the run was made.
	JSON       bool
	Plot       string // .svg or .html file
	CPUProfile string
	MemProfile string
	Trace      string
	Quiet      bool // no progress display
}

// Defaults returns the default workload.
func Defaults() Config {
	return Config{
		Producers:   4,
		Partitions:  4,
		RecordSize:  100,
		Batch:       100,
		Codec:       "none",
		Fsync:       "never",
		Mode:        "idempotent",
		TxnBatches:  10,
		Isolation:   "read_uncommitted",
		Topic:       "bench",
		Payload:     "text",
		Seed:        1,
		BaselineMax: 5 * time.Second,
		Slice:       DefaultSlice,
		// Bounded in bytes: retention deletes what the run wrote
		// beyond 128 MiB per partition, so that a run of any length
		// holds the same dirty pages, and the baseline's ring as many
		// (ringKeep).
		SegmentBytes:   DefaultSegmentBytes,
		RetentionBytes: DefaultRetentionBytes,
	}
}

// parsed is a validated Config in the engine's terms.
type parsed struct {
	codec    batch.Codec
	sync     syncPolicy
	plain    bool
	txn      bool
	duration time.Duration // 0 in records mode
}

func usagef(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUsage, fmt.Sprintf(format, args...))
}

// Validate reports whether c can run: an error wrapping ErrUsage for a bad
// value, or ErrUnavailable for a feature idemlog lacks.
func (c Config) Validate() error {
	_, err := c.parse()
	return err
}

func (c Config) parse() (parsed, error) {
	var p parsed
	var err error
	switch {
	case c.Producers < 1 || c.Producers > MaxProducers:
		return p, usagef("--producers %d is not in 1..%d", c.Producers, MaxProducers)
	case c.Partitions < 1 || c.Partitions > MaxPartitions:
		return p, usagef("--partitions %d is not in 1..%d", c.Partitions, MaxPartitions)
	case c.RecordSize < 0 || c.RecordSize > MaxRecordSize:
		return p, usagef("--record-size %d is not in 0..%d", c.RecordSize, MaxRecordSize)
	case c.Batch < 1:
		return p, usagef("--batch %d is not positive", c.Batch)
	case c.Batch > MaxBatchBytes:
		// Every record takes at least a byte: this also keeps the
		// products below from overflowing.
		return p, usagef("--batch %d makes batches over %d MiB", c.Batch, MaxBatchBytes>>20)
	case int64(c.Batch)*int64(c.RecordSize+8) > MaxBatchBytes:
		return p, usagef("--batch %d x --record-size %d makes batches over %d MiB", c.Batch, c.RecordSize, MaxBatchBytes>>20)
	case c.TxnBatches < 1:
		return p, usagef("--txn-batches %d is not positive", c.TxnBatches)
	case c.Duration < 0:
		return p, usagef("--duration %v is negative", c.Duration)
	case c.Records < 0:
		return p, usagef("--records %d is negative", c.Records)
	case c.Duration > 0 && c.Records > 0:
		return p, usagef("--duration and --records exclude each other")
	case c.Readers < 0 || c.Readers > MaxReaders:
		return p, usagef("--readers %d is not in 0..%d", c.Readers, MaxReaders)
	case c.SegmentBytes < 0:
		return p, usagef("--segment-bytes %d is negative", c.SegmentBytes)
	case c.SegmentBytes > 0 && int64(c.Batch)*int64(c.RecordSize+8)*2 > c.SegmentBytes:
		return p, usagef("--segment-bytes %d is too small for batches of %d x %d bytes", c.SegmentBytes, c.Batch, c.RecordSize)
	case c.RetentionBytes < 0:
		return p, usagef("--retention-bytes %d is negative", c.RetentionBytes)
	case c.RetentionBytes > 0 && c.Readers > 0:
		return p, usagef("--retention-bytes and --readers exclude each other: readers start at offset 0, which retention deletes")
	case c.BaselineMax < 0:
		return p, usagef("--baseline-max %v is negative", c.BaselineMax)
	case c.Slice < 0 || c.Slice > 0 && c.Slice < time.Millisecond:
		return p, usagef("--slice %v: want 0 (the baseline after the run) or at least 1ms", c.Slice)
	case c.Topic == "":
		return p, usagef("--topic is empty")
	}
	if p.codec, err = batch.ParseCodec(c.Codec); err != nil {
		return p, usagef("--codec %q: want none, gzip, snappy, lz4 or zstd", c.Codec)
	}
	if p.sync, err = parseSync(c.Fsync); err != nil {
		return p, usagef("--fsync: %v", err)
	}
	switch c.Payload {
	case "text", "random":
	default:
		return p, usagef("--payload %q: want text or random", c.Payload)
	}
	switch ext := strings.ToLower(filepath.Ext(c.Plot)); {
	case c.Plot == "", ext == ".svg", ext == ".html", ext == ".htm":
	default:
		return p, usagef("--plot %q: want a .svg or .html file", c.Plot)
	}
	switch c.Isolation {
	case "read_uncommitted":
	case "read_committed":
	default:
		return p, usagef("--isolation %q: want read_uncommitted or read_committed", c.Isolation)
	}
	switch c.Mode {
	case "plain":
		p.plain = true
	case "idempotent":
	case "transactional":
		p.txn = true
	default:
		return p, usagef("--mode %q: want plain, idempotent or transactional", c.Mode)
	}
	p.duration = c.Duration
	if c.Records == 0 && p.duration == 0 {
		p.duration = DefaultDuration
	}
	return p, nil
}

// maxBatchSize is the engine's max.message.bytes for the workload: Kafka's
// default, or more when the batches are larger (random payloads may grow a
// little when compressed).
func (c Config) maxBatchSize() int {
	est := batch.HeaderSize + c.Batch*(c.RecordSize+24)
	return max(batch.DefaultMaxBatchSize, est+est/8+4096)
}

// Workload is Config as the report shows it: every flag, durations as
// strings.
type Workload struct {
	Producers    int    `json:"producers"`
	Partitions   int    `json:"partitions"`
	RecordSize   int    `json:"record_size"`
	Batch        int    `json:"batch"`
	Codec        string `json:"codec"`
	Fsync        string `json:"fsync"`
	Mode         string `json:"mode"`
	TxnBatches   int    `json:"txn_batches"`
	Duration     string `json:"duration"`
	Records      int64  `json:"records"`
	Readers      int    `json:"readers"`
	Isolation    string `json:"isolation"`
	Dir          string `json:"dir"`
	Topic        string `json:"topic"`
	SegmentBytes int64  `json:"segment_bytes"`
	// RetentionBytes: 0 when off.
	RetentionBytes int64  `json:"retention_bytes"`
	Payload        string `json:"payload"`
	Seed           int64  `json:"seed"`
	BaselineMax    string `json:"baseline_max"`
	Slice          string `json:"slice"`
	JSON           bool   `json:"json"`
	Plot           string `json:"plot"`
	CPUProfile     string `json:"cpuprofile"`
	MemProfile     string `json:"memprofile"`
	Trace          string `json:"trace"`
	Quiet          bool   `json:"quiet"`
}

// Workload returns c for the report. Duration is "" in records mode.
func (c Config) Workload() Workload {
	w := Workload{
		Producers: c.Producers, Partitions: c.Partitions, RecordSize: c.RecordSize, Batch: c.Batch,
		Codec: c.Codec, Fsync: c.Fsync, Mode: c.Mode, TxnBatches: c.TxnBatches,
		Records: c.Records, Readers: c.Readers, Isolation: c.Isolation, Dir: c.Dir, Topic: c.Topic,
		SegmentBytes: c.SegmentBytes, RetentionBytes: c.RetentionBytes, Payload: c.Payload, Seed: c.Seed, BaselineMax: c.BaselineMax.String(), Slice: c.Slice.String(),
		JSON: c.JSON, Plot: c.Plot, CPUProfile: c.CPUProfile, MemProfile: c.MemProfile, Trace: c.Trace, Quiet: c.Quiet,
	}
	if c.Records == 0 {
		w.Duration = c.Duration.String()
		if c.Duration == 0 {
			w.Duration = DefaultDuration.String()
		}
	}
	return w
}
