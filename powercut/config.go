package powercut

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/partition"
	"github.com/idemlog/idemlog/segment"
)

// Config is what a child process is told: where the data dir is and how
// the engine is configured. Every open of a data dir in a trial uses the
// same Config, as a restarted server would.
type Config struct {
	Dir    string
	Policy partition.SyncPolicy
	Mode   segment.WriteMode
	// DurableVisibility is partition.Options.DurableVisibility (with
	// SyncAlways only).
	DurableVisibility bool
	// Seed drives the workload's choices.
	Seed uint64
	// Stage numbers the workload runs of a trial, from 1.
	Stage int
	// Retries is a file of batches the workload sends again first, one
	// "topic partition hex" per line: the last batch each producer of the
	// earlier stages sent to each partition, as a producer retries after
	// reconnecting.
	Retries string
}

// Environment variables carrying a Config to a child process.
const (
	envDir        = "POWERCUT_DIR"
	envPolicy     = "POWERCUT_POLICY"
	envMode       = "POWERCUT_MODE"
	envDurableVis = "POWERCUT_DURABLE_VISIBILITY"
	envSeed       = "POWERCUT_SEED"
	envStage      = "POWERCUT_STAGE"
	envRetries    = "POWERCUT_RETRIES"
)

// Env renders c for ConfigFromEnv.
func (c Config) Env() []string {
	vis := "0"
	if c.DurableVisibility {
		vis = "1"
	}
	return []string{
		envDir + "=" + c.Dir,
		envPolicy + "=" + c.Policy.String(),
		envMode + "=" + ModeName(c.Mode),
		envDurableVis + "=" + vis,
		envSeed + "=" + strconv.FormatUint(c.Seed, 10),
		envStage + "=" + strconv.Itoa(c.Stage),
		envRetries + "=" + c.Retries,
	}
}

// ConfigFromEnv reads the Config a parent passed; ok is false outside a
// child process.
func ConfigFromEnv() (c Config, ok bool, err error) {
	c.Dir = os.Getenv(envDir)
	if c.Dir == "" {
		return c, false, nil
	}
	if c.Policy, err = partition.ParseSyncPolicy(os.Getenv(envPolicy)); err != nil {
		return c, true, err
	}
	if c.Mode, err = ParseMode(os.Getenv(envMode)); err != nil {
		return c, true, err
	}
	c.DurableVisibility = os.Getenv(envDurableVis) == "1"
	if c.Seed, err = strconv.ParseUint(os.Getenv(envSeed), 10, 64); err != nil {
		return c, true, fmt.Errorf("cannot parse %s: %w", envSeed, err)
	}
	if c.Stage, err = strconv.Atoi(os.Getenv(envStage)); err != nil {
		return c, true, fmt.Errorf("cannot parse %s: %w", envStage, err)
	}
	c.Retries = os.Getenv(envRetries)
	return c, true, nil
}

// Modes are the segment write modes a campaign covers.
var Modes = []segment.WriteMode{segment.WriteMmap, segment.WriteMixed, segment.WritePwrite}

// ModeName names a write mode for flags and output.
func ModeName(m segment.WriteMode) string {
	switch m {
	case segment.WriteMmap:
		return "mmap"
	case segment.WriteMixed:
		return "mixed"
	case segment.WritePwrite:
		return "pwrite"
	}
	return "default"
}

// ParseMode is the inverse of ModeName.
func ParseMode(s string) (segment.WriteMode, error) {
	for _, m := range append([]segment.WriteMode{segment.WriteDefault}, Modes...) {
		if ModeName(m) == s {
			return m, nil
		}
	}
	return 0, fmt.Errorf("cannot parse write mode %q: want %s", s, strings.Join([]string{"default", "mmap", "mixed", "pwrite"}, ", "))
}

// Topics of the workload. Small segments make every run roll, seal,
// snapshot and (on the retention topic) delete and recycle segments.
const (
	topicIdem      = "idem"      // idempotent producers, DeleteRecords
	topicRetention = "retention" // idempotent producers, retention.bytes
	topicTxn       = "txn"       // transactional producers
	topicTmpPrefix = "tmp-"      // created, written and deleted
	topicKV        = "kv"        // cleanup.policy=compact, keyed records
	kvKeys         = 20
	idemParts      = 3
	txnParts       = 2
	groupPlain     = "plain"  // CommitOffsets outside transactions
	groupReader    = "reader" // engine.Consumer's Commit
	segmentBytes   = 48 << 10
	retentionBytes = 96 << 10
)

// TxnIDs are the transactional ids the workload uses: two through
// engine.TransactionalProducer (transaction version 2) and one through the
// coordinator's own calls with transaction version 1.
var TxnIDs = []string{"tx-a", "tx-b", "tx-v1"}

// txnGroup is the group whose offsets the transactions of id commit: one
// per id, so that each group's offsets rise with its transactions.
func txnGroup(id string) string { return "etl-" + id }

// TxnTimeout is the workload's transaction timeout; the checker waits a
// bounded multiple of it for every id to be re-initialisable.
const TxnTimeout = 2 * time.Second

// EngineOptions are the engine options of every open in a trial.
func (c Config) EngineOptions() engine.Options {
	var o engine.Options
	o.Partition.Sync = c.Policy
	o.Partition.DurableVisibility = c.DurableVisibility && c.Policy.Kind == partition.SyncAlways
	o.Partition.Segment.MaxBytes = segmentBytes
	o.Partition.Segment.IndexMaxBytes = 4 << 10
	o.Partition.Segment.ReserveAhead = 16 << 10
	o.Partition.Segment.Mode = c.Mode
	o.MaintainInterval = 50 * time.Millisecond
	o.RetentionInterval = 100 * time.Millisecond
	o.Cleaner.Backoff = 50 * time.Millisecond
	return o
}

// Reporter writes the child's protocol lines to stdout, one write(2) per
// line, so that a line the parent reads was complete before a SIGKILL.
type Reporter struct {
	mu  sync.Mutex
	buf []byte
}

// Printf writes one line.
func (r *Reporter) Printf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf = fmt.Appendf(r.buf[:0], format, args...)
	r.buf = append(r.buf, '\n')
	_, _ = os.Stdout.Write(r.buf)
}
