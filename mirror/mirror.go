// Package mirror copies topics exactly once from one Kafka-protocol log to
// another: an idemlog data dir opened in this process (an engine served
// through kafka.Server.Dial, so the same client code runs) or a cluster
// reached through its brokers, on either side.
//
// The copy follows Kafka Connect's exactly-once source design (KIP-618).
// Records are consumed read_committed (aborted transactions never reach
// the destination) and produced in destination transactions; every
// transaction also writes the source positions it advanced to a
// compacted positions topic in the destination. Copied records and the
// positions that say they were copied commit or abort together, so a
// mirror stopped at any moment (SIGKILL included) resumes from the
// positions its last committed transaction wrote: nothing lost, nothing
// twice. A restarted mirror first loads its transactional producer id,
// which fences the previous incarnation and settles its open
// transaction, and only then reads the positions (read_committed, up to
// the last stable offset), so that no transaction of the old incarnation
// is still pending when the positions are read.
//
// Why a positions topic and not a consumer group's offsets committed in
// the transaction (TxnOffsetCommit): the group would live on the
// destination, which is right, but the offsets of a group with no members
// expire (Kafka's offsets.retention.minutes, 7 days by default); a
// partition that receives nothing for longer would lose its position and
// be copied again from the start. A compacted topic keeps the last
// position of every partition for good, and any client can read it.
//
// Each record keeps its key, value (a null value stays null: tombstones
// of compacted topics survive), headers, timestamp and partition number;
// offsets are the destination's own (the source's control records and
// aborted records take offsets there that the copy does not). Missing
// destination topics are created with the source's partition count and
// its topic-level config overrides; a destination topic with fewer
// partitions than its source is refused (ErrDestinationRefused) unless it
// is empty, which is how a mirror killed while the destination created
// the topic leaves it (idemlog creates partitions one by one): that one
// is grown to the source's count.
package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/errcode"
	"github.com/idemlog/idemlog/kafka"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Sentinels. ErrDestinationRefused: the destination cannot take the copy
// as it is (a topic with fewer partitions than its source, a topic it
// refuses to create, a record it refuses); retrying would not help.
var (
	ErrDestinationRefused = errcode.New(errcode.InvalidRequest, "destination refused")
	ErrNoTopics           = errcode.New(errcode.UnknownTopicOrPartition, "no source topic matches")
	// ErrEndpoint: an Endpoint with neither or both of Dir and Brokers,
	// or a source Dir that does not exist (opening it would create an
	// empty one).
	ErrEndpoint = errcode.New(errcode.InvalidRequest, "invalid endpoint")
)

// DefaultPositionsTopic is the destination topic where mirrors keep their
// source positions.
const DefaultPositionsTopic = "__idemlog_mirror_offsets"

// Endpoint is one side of a mirror: Dir, an idemlog data dir opened in
// this process, or Brokers, seed brokers of a Kafka-protocol cluster.
type Endpoint struct {
	Dir     string
	Brokers []string
	// Opts are more client options (TLS, SASL) for Brokers.
	Opts []kgo.Opt
}

func (e Endpoint) String() string {
	if e.Dir != "" {
		return "dir " + e.Dir
	}
	return strings.Join(e.Brokers, ",")
}

// Options configure Run. Zero fields take the documented defaults.
type Options struct {
	From, To Endpoint
	// Topics selects source topics by name; nil: all. Topics whose name
	// starts with "__" (Kafka's internal topics, positions topics) are
	// never copied.
	Topics *regexp.Regexp
	// Name identifies the mirror: its transactional id is
	// "idemlog-mirror-" + Name and its positions are keyed by it, so
	// mirrors of different names share a destination ("idemlog").
	Name string
	// PositionsTopic is the destination topic of the positions
	// (DefaultPositionsTopic).
	PositionsTopic string
	// CommitInterval is how long a transaction collects records before it
	// commits (100 ms); MaxTransactionRecords caps it by count (100000).
	CommitInterval        time.Duration
	MaxTransactionRecords int
	// StopAtEnd returns once every partition is copied up to the last
	// stable offset it had when the mirror started.
	StopAtEnd bool
	// Progress, if set, is called every ProgressInterval (1 s) and once at
	// the end.
	Progress         func(Progress)
	ProgressInterval time.Duration
	// TopicScanInterval is how often a running mirror (not StopAtEnd)
	// lists the source topics again, to copy new topics that Topics
	// matches and new partitions (30 s).
	TopicScanInterval time.Duration
	// RetryBackoff is the longest wait between attempts after a failure
	// that may pass (a broker down): 5 s.
	RetryBackoff time.Duration
	// Logger receives the mirror's logs; nil discards them.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Name == "" {
		o.Name = "idemlog"
	}
	if o.PositionsTopic == "" {
		o.PositionsTopic = DefaultPositionsTopic
	}
	if o.CommitInterval <= 0 {
		o.CommitInterval = 100 * time.Millisecond
	}
	if o.MaxTransactionRecords <= 0 {
		o.MaxTransactionRecords = 100_000
	}
	if o.ProgressInterval <= 0 {
		o.ProgressInterval = time.Second
	}
	if o.TopicScanInterval <= 0 {
		o.TopicScanInterval = 30 * time.Second
	}
	if o.RetryBackoff <= 0 {
		o.RetryBackoff = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Progress is a snapshot of a running mirror.
type Progress struct {
	// Records is how many records committed transactions copied since Run
	// started; RecordsPerSecond is the rate over the last interval.
	Records          int64
	RecordsPerSecond float64
	Partitions       []PartitionProgress
	// Done: the last snapshot, Run is returning.
	Done bool
}

// PartitionProgress is one source partition: Position is the next source
// offset to copy, End the last stable offset last seen, Lag the
// difference.
type PartitionProgress struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Position  int64  `json:"position"`
	End       int64  `json:"end"`
	Lag       int64  `json:"lag"`
}

type tp struct {
	topic     string
	partition int32
}

// side is an open endpoint: the options that reach it.
type side struct {
	opts  []kgo.Opt
	close func()
}

// open reaches e; a source dir must exist already.
func open(e Endpoint, source bool, log *slog.Logger) (*side, error) {
	switch {
	case e.Dir == "" && len(e.Brokers) == 0:
		return nil, fmt.Errorf("cannot open endpoint: %w: neither a data dir nor brokers given", ErrEndpoint)
	case e.Dir != "" && len(e.Brokers) > 0:
		return nil, fmt.Errorf("cannot open endpoint: %w: both a data dir and brokers given", ErrEndpoint)
	case e.Dir == "":
		return &side{opts: append([]kgo.Opt{kgo.SeedBrokers(e.Brokers...)}, e.Opts...), close: func() {}}, nil
	}
	if fi, err := os.Stat(e.Dir); source && (err != nil || !fi.IsDir()) {
		return nil, fmt.Errorf("cannot open source %s: %w: not a data dir", e.Dir, ErrEndpoint)
	}
	eng, err := engine.Open(e.Dir, engine.Options{})
	if err != nil {
		return nil, fmt.Errorf("cannot open %s: %w", e.Dir, err)
	}
	srv, err := kafka.New(eng, kafka.Options{Logger: log})
	if err != nil {
		eng.Close()
		return nil, fmt.Errorf("cannot serve %s in-process: %w", e.Dir, err)
	}
	return &side{
		opts: []kgo.Opt{kgo.SeedBrokers("idemlog"), kgo.Dialer(srv.Dial)},
		close: func() {
			srv.Close()
			eng.Close()
		},
	}, nil
}

// Run copies until ctx is done (then it returns nil), StopAtEnd is
// reached, or an error that retrying cannot pass: ErrDestinationRefused,
// ErrNoTopics, an endpoint that cannot be opened. Other failures (a broker
// restarting, a transaction aborted by its timeout) abort the transaction
// in hand and start over from the positions in the destination.
func Run(ctx context.Context, o Options) error {
	o = o.withDefaults()
	from, err := open(o.From, true, o.Logger)
	if err != nil {
		return err
	}
	defer from.close()
	to, err := open(o.To, false, o.Logger)
	if err != nil {
		return err
	}
	defer to.close()
	m := &mirror{o: o, from: from, to: to, started: time.Now()}
	backoff := 100 * time.Millisecond
	for {
		err := m.copyOnce(ctx)
		if ctx.Err() != nil {
			m.report(true)
			return nil
		}
		if err == nil || isFatal(err) {
			m.report(true)
			return err
		}
		if errors.Is(err, errSourceChanged) {
			o.Logger.Info("source topics changed; starting over with them")
			backoff = 100 * time.Millisecond
			continue
		}
		o.Logger.Warn("mirror failed; starting over from the destination's positions", "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			m.report(true)
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, o.RetryBackoff)
	}
}

// isFatal: an error that another attempt would meet again.
func isFatal(err error) bool {
	if errors.Is(err, ErrDestinationRefused) || errors.Is(err, ErrNoTopics) || errors.Is(err, ErrEndpoint) {
		return true
	}
	for _, e := range []*kerr.Error{kerr.TopicAuthorizationFailed, kerr.ClusterAuthorizationFailed,
		kerr.TransactionalIDAuthorizationFailed, kerr.GroupAuthorizationFailed, kerr.SaslAuthenticationFailed,
		kerr.IllegalSaslState, kerr.UnsupportedSaslMechanism} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

type mirror struct {
	o        Options
	from, to *side
	started  time.Time
	// lastSnapshot is when a transaction last wrote every position.
	lastSnapshot time.Time

	// mu guards the progress state, which copyOnce updates and report
	// reads.
	mu         sync.Mutex
	copied     int64
	lastCopied int64
	lastReport time.Time
	position   map[tp]int64
	end        map[tp]int64
}

func (m *mirror) report(done bool) {
	if m.o.Progress == nil {
		return
	}
	m.mu.Lock()
	now := time.Now()
	since := m.lastReport
	if since.IsZero() {
		since = m.started
	}
	p := Progress{Records: m.copied, Done: done}
	if d := now.Sub(since).Seconds(); d > 0 {
		p.RecordsPerSecond = float64(m.copied-m.lastCopied) / d
	}
	m.lastCopied, m.lastReport = m.copied, now
	for k, pos := range m.position {
		end := max(m.end[k], pos)
		p.Partitions = append(p.Partitions, PartitionProgress{Topic: k.topic, Partition: k.partition, Position: pos, End: end, Lag: end - pos})
	}
	m.mu.Unlock()
	slices.SortFunc(p.Partitions, func(a, b PartitionProgress) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	m.o.Progress(p)
}

// positionKey and positionValue are the positions topic's records, JSON
// so that any consumer can read them; the key names the mirror, so
// mirrors of several names share the topic, and compaction keeps the
// last position of each partition.
type positionKey struct {
	Mirror    string `json:"mirror"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

type positionValue struct {
	Offset int64 `json:"offset"`
}

// copyOnce is one attempt: set up both sides, then copy until ctx is
// done, StopAtEnd is reached or something fails.
func (m *mirror) copyOnce(ctx context.Context) error {
	src, err := kgo.NewClient(m.from.opts...)
	if err != nil {
		return fmt.Errorf("cannot create source client: %w", err)
	}
	defer src.Close()
	dst, err := kgo.NewClient(append(append(slices.Clone(m.to.opts), producerOpts()...),
		kgo.TransactionalID("idemlog-mirror-"+m.o.Name))...)
	if err != nil {
		return fmt.Errorf("cannot create destination client: %w", err)
	}
	defer dst.Close()

	topics, err := sourceTopics(ctx, src, m.o.Topics)
	if err != nil {
		return err
	}
	if err := ensureTopics(ctx, src, dst, topics, m.o.PositionsTopic); err != nil {
		return err
	}
	// The producer id first: it fences the previous incarnation and
	// settles its open transaction, so that the positions read next are
	// final.
	if _, _, err := dst.ProducerID(ctx); err != nil {
		return fmt.Errorf("cannot initialize the destination's transactional producer: %w", err)
	}
	positions, err := readPositions(ctx, dst, m.o.PositionsTopic, m.o.Name)
	if err != nil {
		return err
	}
	starts, err := listOffsets(ctx, src, topics, -2, 0)
	if err != nil {
		return err
	}
	ends, err := listOffsets(ctx, src, topics, -1, 1)
	if err != nil {
		return err
	}
	consume := map[string]map[int32]kgo.Offset{}
	m.mu.Lock()
	m.position, m.end = map[tp]int64{}, maps.Clone(ends)
	for k, start := range starts {
		pos, ok := positions[k]
		if !ok {
			pos = start
		} else if pos < start {
			m.o.Logger.Warn("source records were deleted before they were copied", "topic", k.topic, "partition", k.partition,
				"position", pos, "log_start", start)
			pos = start
		}
		m.position[k] = pos
		if consume[k.topic] == nil {
			consume[k.topic] = map[int32]kgo.Offset{}
		}
		consume[k.topic][k.partition] = kgo.NewOffset().At(pos)
	}
	m.mu.Unlock()
	m.o.Logger.Info("mirroring", "from", m.o.From.String(), "to", m.o.To.String(), "topics", len(topics), "partitions", len(starts))

	cons, err := kgo.NewClient(append(slices.Clone(m.from.opts),
		kgo.ConsumePartitions(consume),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.FetchMaxBytes(64<<20),
		kgo.FetchMaxPartitionBytes(8<<20),
	)...)
	if err != nil {
		return fmt.Errorf("cannot create source consumer: %w", err)
	}
	defer cons.Close()
	return m.copyLoop(ctx, cons, dst, ends, topics)
}

// producerOpts are the destination producer's options but its
// transactional id: records go to the partition they came from, in
// batches as large as a source batch may be.
func producerOpts() []kgo.Opt {
	return []kgo.Opt{
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(16 << 20),
		kgo.MaxBufferedRecords(100_000),
	}
}

// txn is the destination transaction in hand.
type txn struct {
	open    bool
	started time.Time
	records int64
	dirty   map[tp]int64
	errMu   sync.Mutex
	err     error
}

func (t *txn) fail(err error) {
	t.errMu.Lock()
	if t.err == nil {
		t.err = err
	}
	t.errMu.Unlock()
}

// errSourceChanged ends an attempt whose source topics (names or
// partition counts) are no longer those it started with: the next one
// creates and copies the new ones.
var errSourceChanged = errors.New("source topics changed")

func (m *mirror) copyLoop(ctx context.Context, cons, dst *kgo.Client, startEnds map[tp]int64, topics map[string]int32) error {
	t := &txn{dirty: map[tp]int64{}}
	abort := func() {
		if !t.open {
			return
		}
		// A context that is not ctx: the abort must go out after a
		// signal too, so the destination does not wait for the
		// transaction's timeout.
		actx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := dst.AbortBufferedRecords(actx); err == nil {
			dst.EndTransaction(actx, kgo.TryAbort)
		}
		t.open = false
	}
	defer abort()
	lastReport, lastScan := time.Now(), time.Now()
	for {
		wait := m.o.ProgressInterval
		if t.open {
			wait = max(time.Millisecond, m.o.CommitInterval-time.Since(t.started))
		}
		pctx, cancel := context.WithTimeout(ctx, wait)
		fs := cons.PollRecords(pctx, 10_000)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		var fetchErr error
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) && fetchErr == nil {
				fetchErr = fmt.Errorf("cannot fetch %s/%d from the source: %w", topic, p, err)
			}
		})
		if fetchErr != nil {
			return fetchErr
		}
		m.mu.Lock()
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if p.LastStableOffset > 0 {
				m.end[tp{p.Topic, p.Partition}] = p.LastStableOffset
			}
		})
		m.mu.Unlock()
		var copied []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) {
			k := tp{r.Topic, r.Partition}
			m.mu.Lock()
			m.position[k] = r.Offset + 1
			m.mu.Unlock()
			if r.Attrs.IsControl() {
				return // a marker: it moves the position only
			}
			copied = append(copied, r)
			t.dirty[k] = r.Offset + 1
		})
		if len(copied) > 0 {
			if !t.open {
				if err := dst.BeginTransaction(); err != nil {
					return fmt.Errorf("cannot begin a destination transaction: %w", err)
				}
				t.open, t.started, t.records, t.err = true, time.Now(), 0, nil
			}
			for _, r := range copied {
				out := &kgo.Record{Topic: r.Topic, Partition: r.Partition, Key: r.Key, Value: r.Value,
					Headers: r.Headers, Timestamp: r.Timestamp}
				dst.Produce(ctx, out, func(_ *kgo.Record, err error) {
					if err != nil {
						t.fail(err)
					}
				})
			}
			t.records += int64(len(copied))
		}
		if t.open && (time.Since(t.started) >= m.o.CommitInterval || t.records >= int64(m.o.MaxTransactionRecords)) {
			if err := m.commit(ctx, dst, t); err != nil {
				return err
			}
		}
		if time.Since(lastReport) >= m.o.ProgressInterval {
			lastReport = time.Now()
			m.report(false)
		}
		if m.o.StopAtEnd && !t.open && m.caughtUp(startEnds) {
			return nil
		}
		if !t.open && !m.o.StopAtEnd && time.Since(lastScan) >= m.o.TopicScanInterval {
			lastScan = time.Now()
			now, err := sourceTopics(ctx, cons, m.o.Topics)
			if err != nil && !errors.Is(err, ErrNoTopics) {
				return err
			}
			if !maps.Equal(now, topics) {
				return errSourceChanged
			}
		}
	}
}

// snapshotEvery is how often a transaction writes the position of every
// partition, not only of those it advanced; once it commits, the
// positions topic's records before it are deleted (DeleteRecords), so a
// destination without compaction keeps a short positions topic too, and a
// restart reads little. On a compacted topic Kafka refuses the deletion,
// and compaction does the job.
var snapshotEvery = 30 * time.Second

// commit writes the positions the transaction advanced and commits it.
func (m *mirror) commit(ctx context.Context, dst *kgo.Client, t *txn) error {
	positions := t.dirty
	snapshot := time.Since(m.lastSnapshot) >= snapshotEvery
	if snapshot {
		// Every position seen is final: the records before it were
		// copied by this transaction or committed ones, or are control
		// records.
		m.mu.Lock()
		positions = maps.Clone(m.position)
		m.mu.Unlock()
	}
	var firstMu sync.Mutex
	first := int64(-1)
	for k, off := range positions {
		key, _ := json.Marshal(positionKey{Mirror: m.o.Name, Topic: k.topic, Partition: k.partition})
		val, _ := json.Marshal(positionValue{Offset: off})
		dst.Produce(ctx, &kgo.Record{Topic: m.o.PositionsTopic, Partition: 0, Key: key, Value: val}, func(r *kgo.Record, err error) {
			if err != nil {
				t.fail(err)
				return
			}
			firstMu.Lock()
			if first < 0 || r.Offset < first {
				first = r.Offset
			}
			firstMu.Unlock()
		})
	}
	if err := dst.Flush(ctx); err != nil {
		return fmt.Errorf("cannot flush the destination transaction: %w", err)
	}
	if t.err != nil {
		return classifyProduce(t.err)
	}
	if err := dst.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return fmt.Errorf("cannot commit the destination transaction: %w", err)
	}
	t.open = false
	clear(t.dirty)
	m.mu.Lock()
	m.copied += t.records
	m.mu.Unlock()
	if snapshot {
		m.lastSnapshot = time.Now()
		if first > 0 {
			m.trimPositions(ctx, dst, first)
		}
	}
	return nil
}

// trimPositions deletes the positions topic's records before offset, the
// first of a committed snapshot. A failure costs nothing but space: it is
// logged and the next snapshot tries again.
func (m *mirror) trimPositions(ctx context.Context, dst *kgo.Client, offset int64) {
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = 30_000
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = m.o.PositionsTopic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = 0, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, dst)
	if err == nil && (len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1) {
		err = errors.New("malformed response")
	}
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
	}
	if err != nil {
		m.o.Logger.Debug("cannot trim the positions topic", "before", offset, "err", err)
	}
}

// classifyProduce marks the produce errors no retry can pass as refusals.
func classifyProduce(err error) error {
	for _, e := range []*kerr.Error{kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidTopicException,
		kerr.InvalidRecord, kerr.PolicyViolation, kerr.InvalidTimestamp} {
		if errors.Is(err, e) {
			return fmt.Errorf("cannot produce to the destination: %w: %w", ErrDestinationRefused, err)
		}
	}
	return fmt.Errorf("cannot produce to the destination: %w", err)
}

func (m *mirror) caughtUp(ends map[tp]int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, end := range ends {
		if m.position[k] < end {
			return false
		}
	}
	return true
}

// sourceTopics lists the source topics re selects with their partition
// counts and ids.
func sourceTopics(ctx context.Context, cl *kgo.Client, re *regexp.Regexp) (map[string]int32, error) {
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("cannot list source topics: %w", err)
	}
	out := map[string]int32{}
	for _, t := range resp.Topics {
		if t.Topic == nil || t.IsInternal || strings.HasPrefix(*t.Topic, "__") {
			continue
		}
		if re != nil && !re.MatchString(*t.Topic) {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return nil, fmt.Errorf("cannot describe source topic %s: %w", *t.Topic, err)
		}
		out[*t.Topic] = int32(len(t.Partitions))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("cannot mirror: %w %v", ErrNoTopics, re)
	}
	return out, nil
}

// ensureTopics checks that every source topic has a destination topic
// with at least its partitions, creating missing ones with the source's
// partition count and topic-level config overrides, and creates the
// positions topic (one partition, compacted) if missing.
func ensureTopics(ctx context.Context, src, dst *kgo.Client, topics map[string]int32, positions string) error {
	req := kmsg.NewPtrMetadataRequest()
	for name := range topics {
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, t)
	}
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(positions)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, dst)
	if err != nil {
		return fmt.Errorf("cannot describe destination topics: %w", err)
	}
	var missing []string
	for _, t := range resp.Topics {
		name := *t.Topic
		err := kerr.ErrorForCode(t.ErrorCode)
		switch {
		case errors.Is(err, kerr.UnknownTopicOrPartition):
			missing = append(missing, name)
		case err != nil:
			return fmt.Errorf("cannot describe destination topic %s: %w", name, err)
		case name == positions:
		case int32(len(t.Partitions)) < topics[name]:
			if err := growEmptyTopic(ctx, dst, name, int32(len(t.Partitions)), topics[name]); err != nil {
				return err
			}
		}
	}
	if i := slices.Index(missing, positions); i >= 0 {
		missing = slices.Delete(missing, i, i+1)
		if err := createPositionsTopic(ctx, dst, positions); err != nil {
			return err
		}
	}
	if len(missing) == 0 {
		return nil
	}
	slices.Sort(missing)
	configs, err := topicConfigs(ctx, src, missing, positions)
	if err != nil {
		return err
	}
	create := kmsg.NewPtrCreateTopicsRequest()
	create.TimeoutMillis = 30_000
	for _, name := range missing {
		ct := kmsg.NewCreateTopicsRequestTopic()
		ct.Topic, ct.ReplicationFactor = name, -1
		ct.NumPartitions = topics[name]
		if name == positions {
			continue // below
		}
		for k, v := range configs[name] {
			c := kmsg.NewCreateTopicsRequestTopicConfig()
			c.Name, c.Value = k, v
			ct.Configs = append(ct.Configs, c)
		}
		create.Topics = append(create.Topics, ct)
	}
	cresp, err := create.RequestWith(ctx, dst)
	if err != nil {
		return fmt.Errorf("cannot create destination topics: %w", err)
	}
	for _, t := range cresp.Topics {
		err := kerr.ErrorForCode(t.ErrorCode)
		if err == nil || errors.Is(err, kerr.TopicAlreadyExists) {
			continue
		}
		msg := ""
		if t.ErrorMessage != nil {
			msg = ": " + *t.ErrorMessage
		}
		if kerr.IsRetriable(err) {
			return fmt.Errorf("cannot create destination topic %s: %w%s", t.Topic, err, msg)
		}
		return fmt.Errorf("cannot create destination topic %s: %w: %w%s", t.Topic, ErrDestinationRefused, err, msg)
	}
	// A topic that existed after all (another creator won) is checked
	// like any other.
	return ensureTopicsExist(ctx, dst, topics)
}

// growEmptyTopic raises an empty destination topic with fewer partitions
// than its source to the source's count, and refuses (ErrDestinationRefused)
// one that holds records. An empty one is what a mirror leaves when it is
// killed while an idemlog destination creates the topic's partitions one
// by one; nothing was copied into it yet (copying starts once every topic
// is in place), so growing it loses nothing.
func growEmptyTopic(ctx context.Context, dst *kgo.Client, name string, have, want int32) error {
	refuse := fmt.Errorf("cannot mirror topic %s: %w: the destination has %d partitions, the source %d (partition numbers are kept, so the destination needs at least as many)",
		name, ErrDestinationRefused, have, want)
	ends, err := listOffsets(ctx, dst, map[string]int32{name: have}, -1, 0)
	if err != nil {
		return err
	}
	for _, end := range ends {
		if end > 0 {
			return refuse
		}
	}
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.TimeoutMillis = 30_000
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = name, want
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, dst)
	if err != nil {
		return fmt.Errorf("cannot add partitions to destination topic %s: %w", name, err)
	}
	if len(resp.Topics) != 1 {
		return fmt.Errorf("cannot add partitions to destination topic %s: malformed response", name)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		if kerr.IsRetriable(err) {
			return fmt.Errorf("cannot add partitions to destination topic %s: %w", name, err)
		}
		return fmt.Errorf("%w (adding partitions to the empty topic failed: %w)", refuse, err)
	}
	return nil
}

// createPositionsTopic creates the positions topic: one partition,
// compacted. A destination without compaction (idemlog) gets a topic that
// never expires instead; the mirror keeps it short with DeleteRecords
// (see snapshotEvery).
func createPositionsTopic(ctx context.Context, dst *kgo.Client, name string) error {
	for _, configs := range []map[string]string{
		{"cleanup.policy": "compact"},
		{"retention.ms": "-1", "retention.bytes": "-1"},
	} {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 30_000
		ct := kmsg.NewCreateTopicsRequestTopic()
		ct.Topic, ct.NumPartitions, ct.ReplicationFactor = name, 1, -1
		for k, v := range configs {
			c := kmsg.NewCreateTopicsRequestTopicConfig()
			c.Name, c.Value = k, kmsg.StringPtr(v)
			ct.Configs = append(ct.Configs, c)
		}
		req.Topics = append(req.Topics, ct)
		resp, err := req.RequestWith(ctx, dst)
		if err != nil {
			return fmt.Errorf("cannot create the positions topic %s: %w", name, err)
		}
		if len(resp.Topics) != 1 {
			return fmt.Errorf("cannot create the positions topic %s: malformed response", name)
		}
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
		switch {
		case err == nil || errors.Is(err, kerr.TopicAlreadyExists):
			return nil
		case errors.Is(err, kerr.InvalidConfig) || errors.Is(err, kerr.PolicyViolation):
			continue // no compaction: the next configs
		case kerr.IsRetriable(err):
			return fmt.Errorf("cannot create the positions topic %s: %w", name, err)
		default:
			return fmt.Errorf("cannot create the positions topic %s: %w: %w", name, ErrDestinationRefused, err)
		}
	}
	return fmt.Errorf("cannot create the positions topic %s: %w: neither compacted nor without retention", name, ErrDestinationRefused)
}

func ensureTopicsExist(ctx context.Context, dst *kgo.Client, topics map[string]int32) error {
	req := kmsg.NewPtrMetadataRequest()
	for name := range topics {
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, t)
	}
	resp, err := req.RequestWith(ctx, dst)
	if err != nil {
		return fmt.Errorf("cannot describe destination topics: %w", err)
	}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return fmt.Errorf("cannot describe destination topic %s: %w", *t.Topic, err)
		}
		if int32(len(t.Partitions)) < topics[*t.Topic] {
			return fmt.Errorf("cannot mirror topic %s: %w: the destination has %d partitions, the source %d",
				*t.Topic, ErrDestinationRefused, len(t.Partitions), topics[*t.Topic])
		}
	}
	return nil
}

// topicConfigs returns the topic-level overrides (DYNAMIC_TOPIC_CONFIG)
// of the source topics named, skipping skip (not a source topic).
func topicConfigs(ctx context.Context, src *kgo.Client, names []string, skip string) (map[string]map[string]*string, error) {
	out := map[string]map[string]*string{}
	req := kmsg.NewPtrDescribeConfigsRequest()
	for _, name := range names {
		if name == skip {
			continue
		}
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, name
		req.Resources = append(req.Resources, r)
	}
	if len(req.Resources) == 0 {
		return out, nil
	}
	resp, err := req.RequestWith(ctx, src)
	if err != nil {
		return nil, fmt.Errorf("cannot describe source topic configs: %w", err)
	}
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return nil, fmt.Errorf("cannot describe source topic %s configs: %w", r.ResourceName, err)
		}
		cs := map[string]*string{}
		for _, c := range r.Configs {
			if c.Source == kmsg.ConfigSourceDynamicTopicConfig && !c.IsSensitive {
				cs[c.Name] = c.Value
			}
		}
		out[r.ResourceName] = cs
	}
	return out, nil
}

// listOffsets returns, for every partition of topics, the offset
// ListOffsets answers for timestamp (-2 earliest, -1 latest) at isolation
// (1: read_committed, the last stable offset).
func listOffsets(ctx context.Context, cl *kgo.Client, topics map[string]int32, timestamp int64, isolation int8) (map[tp]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID, req.IsolationLevel = -1, isolation
	for name, n := range topics {
		t := kmsg.NewListOffsetsRequestTopic()
		t.Topic = name
		for p := range n {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p, timestamp, -1
			t.Partitions = append(t.Partitions, rp)
		}
		req.Topics = append(req.Topics, t)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("cannot list source offsets: %w", err)
	}
	out := map[tp]int64{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("cannot list offsets of %s/%d: %w", t.Topic, p.Partition, err)
			}
			out[tp{t.Topic, p.Partition}] = p.Offset
		}
	}
	for name, n := range topics {
		for p := range n {
			if _, ok := out[tp{name, p}]; !ok {
				return nil, fmt.Errorf("cannot list offsets of %s/%d: no answer", name, p)
			}
		}
	}
	return out, nil
}

// readPositions reads the mirror's positions from the positions topic,
// read_committed, up to its last stable offset. It issues its own fetches
// (kgo's consumer does not report a partition it has nothing to return
// for, so it cannot tell "at the end" from "waiting").
func readPositions(ctx context.Context, cl *kgo.Client, topic, name string) (map[tp]int64, error) {
	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	meta.Topics = append(meta.Topics, mt)
	mresp, err := meta.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("cannot describe the positions topic: %w", err)
	}
	if len(mresp.Topics) != 1 || len(mresp.Topics[0].Partitions) == 0 {
		return nil, fmt.Errorf("cannot describe the positions topic %s: no partitions", topic)
	}
	if err := kerr.ErrorForCode(mresp.Topics[0].ErrorCode); err != nil {
		return nil, fmt.Errorf("cannot describe the positions topic %s: %w", topic, err)
	}
	topicID := mresp.Topics[0].TopicID
	leader := mresp.Topics[0].Partitions[0].Leader
	starts, err := listOffsets(ctx, cl, map[string]int32{topic: 1}, -2, 0)
	if err != nil {
		return nil, err
	}
	next := starts[tp{topic, 0}]
	out := map[tp]int64{}
	decompressor := kgo.DefaultDecompressor()
	for {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 0, 1, 64<<20
		req.IsolationLevel, req.SessionEpoch = 1, -1
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic, ft.TopicID = topic, topicID
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = 0, next, 16<<20
		fp.CurrentLeaderEpoch, fp.LogStartOffset = -1, -1
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		resp, err := req.RequestWith(ctx, cl.Broker(int(leader)))
		if err != nil {
			return nil, fmt.Errorf("cannot read the positions topic: %w", err)
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return nil, fmt.Errorf("cannot read the positions topic: %w", err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return nil, fmt.Errorf("cannot read the positions topic: malformed fetch response")
		}
		rp := &resp.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
			return nil, fmt.Errorf("cannot read the positions topic at offset %d: %w", next, err)
		}
		if next >= rp.LastStableOffset {
			return out, nil
		}
		// The offset returned is the one after the last record, control
		// or aborted ones included, that the response held.
		got, after := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
			KeepControlRecords: true, Offset: next, IsolationLevel: kgo.ReadCommitted(), Topic: topic,
		}, rp, decompressor, nil)
		if got.Err != nil {
			return nil, fmt.Errorf("cannot read the positions topic at offset %d: %w", next, got.Err)
		}
		for _, r := range got.Records {
			if r.Attrs.IsControl() || r.Offset >= rp.LastStableOffset {
				continue
			}
			var k positionKey
			var v positionValue
			if json.Unmarshal(r.Key, &k) != nil || k.Mirror != name || r.Value == nil {
				continue // another mirror's, or not a position
			}
			if err := json.Unmarshal(r.Value, &v); err != nil {
				return nil, fmt.Errorf("cannot read the position of %s/%d at offset %d: %w", k.Topic, k.Partition, r.Offset, err)
			}
			out[tp{k.Topic, k.Partition}] = v.Offset
		}
		if after <= next {
			return nil, fmt.Errorf("cannot read the positions topic: no progress at offset %d below its last stable offset %d", next, rp.LastStableOffset)
		}
		next = after
	}
}
