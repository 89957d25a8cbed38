package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemlog/idemlog/internal/enginekill"
	"github.com/idemlog/idemlog/internal/fsutil"
	"github.com/idemlog/idemlog/partition"
	"github.com/idemlog/idemlog/pidtable"
	"golang.org/x/sys/unix"
)

// Options configure an engine. Zero fields take defaults.
type Options struct {
	// Sync is when appends are made durable: SyncNever (the default: the
	// operating system writes back, as Kafka's default does), SyncAlways
	// (every append is synced before it is acknowledged), SyncEvery(d).
	Sync SyncPolicy
	// SegmentBytes is segment.bytes, the size at which a partition's log
	// rolls to a new segment (0: Kafka's 1 GiB).
	SegmentBytes int64
	// Partition holds the rest of the log layer's settings (package
	// partition); Sync and SegmentBytes, where set, take precedence over
	// its fields.
	Partition partition.Options
	// MaxProducersPerPartition bounds producer state per partition
	// (default 100000, about 20 MB); past it, a new producer's append
	// fails with pidtable.ErrTooManyProducers.
	MaxProducersPerPartition int
	// ProducerIDExpiration is producer.id.expiration.ms (default 24h).
	ProducerIDExpiration time.Duration
	// TransactionalIDExpiration is transactional.id.expiration.ms
	// (default 7 days).
	TransactionalIDExpiration time.Duration
	// Now is the clock (producer expiry, retention); nil means time.Now.
	Now func() time.Time
	// MaintainInterval is how often the engine itself enforces
	// transaction timeouts (and completes transactions whose markers
	// failed), expires producer and transactional ids, and, every
	// RetentionInterval, applies retention. 0 means 1 s with the real
	// clock; with a Now of the caller's, 0 means never (who drives the
	// clock drives these too, through Frontend: Coordinator.AbortTimedOut,
	// ExpireProducers, Coordinator.ExpireTransactionalIDs, ApplyRetention).
	// Negative: never.
	MaintainInterval time.Duration
	// RetentionInterval is Kafka's log.retention.check.interval.ms for the
	// engine's own maintenance (5 minutes).
	RetentionInterval time.Duration
	// Logger receives what recovery does when the engine opens: segments
	// truncated or deleted, indexes rebuilt, damaged checkpoints set
	// aside, a producer-id watermark derived again, consumer-offset
	// records that fail their checksum; WARN where data was lost or a file
	// was damaged. It is handed to every partition's log unless
	// Partition.Logger is set. nil means slog.Default(): an embedding
	// program that configured nothing still hears of data a damaged file
	// cost; slog.New(slog.DiscardHandler) silences it.
	Logger *slog.Logger
	// MaxPartitions caps the partitions of the data dir, internal topics
	// included: a creation that would pass it is refused whole with
	// ErrResourceLimit (0: DefaultMaxPartitions; negative: no cap).
	MaxPartitions int
	// Cleaner configures the log cleaner, which compacts the topics whose
	// cleanup.policy lists compact and the internal topics. It runs in
	// the background when maintenance does (MaintainInterval).
	Cleaner CleanerOptions
	// DiskReserve is the free space a creation of partitions must leave on
	// the data dir's filesystem (0: DefaultDiskReserve, or 1% of the
	// filesystem where that is less; negative: none).
	DiskReserve int64

	// private holds the knobs only this package's tests set (knobs.go).
	private testKnobs
}

// SyncPolicy is a partition's fsync policy (partition.SyncPolicy).
type SyncPolicy = partition.SyncPolicy

// The sync policies an Options.Sync takes most often.
var (
	SyncNever  = SyncPolicy{Kind: partition.SyncNever}
	SyncAlways = SyncPolicy{Kind: partition.SyncAlways}
)

// SyncEvery is the policy that syncs each partition's log in the
// background every d (Kafka's flush.ms): a machine crash loses at most the
// last d of acknowledged appends.
func SyncEvery(d time.Duration) SyncPolicy {
	return SyncPolicy{Kind: partition.SyncInterval, Interval: d}
}

func (o Options) withDefaults() Options {
	if o.Sync != (SyncPolicy{}) {
		o.Partition.Sync = o.Sync
	}
	if o.SegmentBytes != 0 {
		o.Partition.Segment.MaxBytes = o.SegmentBytes
	}
	if o.MaxProducersPerPartition <= 0 {
		o.MaxProducersPerPartition = 100_000
	}
	if o.ProducerIDExpiration <= 0 {
		o.ProducerIDExpiration = 24 * time.Hour
	}
	if o.TransactionalIDExpiration <= 0 {
		o.TransactionalIDExpiration = 7 * 24 * time.Hour
	}
	if o.MaintainInterval == 0 && o.Now == nil {
		o.MaintainInterval = time.Second
	}
	if o.MaxPartitions == 0 {
		o.MaxPartitions = DefaultMaxPartitions
	}
	if o.DiskReserve == 0 {
		o.DiskReserve = defaultDiskReserve
	}
	if o.RetentionInterval <= 0 {
		o.RetentionInterval = 5 * time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Partition.Now == nil {
		o.Partition.Now = o.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Partition.Logger == nil {
		o.Partition.Logger = o.Logger
	}
	return o
}

// Engine is a data directory of topics. It is safe for concurrent use.
type Engine struct {
	dir  string
	opts Options
	pids *pidAllocator

	// parts maps "topic-index" to its partition. The map is replaced, never
	// edited (under mu), so lookups on the append path take no lock.
	parts atomic.Pointer[map[string]*Partition]
	// ids are the topics' ids, replaced like parts (see topics.go).
	ids atomic.Pointer[topicIDs]
	mu  sync.Mutex
	// closed is set under mu by Close or Kill; atomic so that partitions
	// read it without mu, to tell an engine's Close from their own log's
	// (Partition.gone).
	closed atomic.Bool

	// coord is the transaction coordinator, made on first use under
	// coordMu (Coordinator).
	coordMu sync.Mutex
	coord   atomic.Pointer[Coordinator]

	// configMu serializes changes of topic configs (alterTopicConfig) with
	// each other and with AddPartitions (whose new partitions take the
	// topic's configs). Taken before mu, and held across the files' writes,
	// which mu is not: every other topic operation goes on meanwhile.
	configMu sync.Mutex

	// offsetStore is the consumer-offsets store, made on first use
	// (offsets) under offsetsMu, which is taken before mu. It belongs to
	// the engine so that it does not outlive it.
	offsetsMu   sync.Mutex
	offsetStore *offsetStore

	// creating holds the creations of partitions in progress, by their
	// topic's collision key, and reserved the partitions they add (under
	// mu): a creation writes its files without mu (see createTopic).
	// creations counts them, for Close and Kill to wait for.
	creating  map[string]*creation
	reserved  int
	creations sync.WaitGroup

	// stopMaintain ends the maintenance goroutine (maintain), if any;
	// maintainDone is closed when it has returned.
	stopMaintain chan struct{}
	// stopCleaner ends the cleaner goroutine (runCleaner), if any;
	// cleanerDone is closed when it has returned. cleanThrottle is the
	// cleaner's I/O bound (nil: none).
	stopCleaner      chan struct{}
	cleanerDone      chan struct{}
	stopCleanerOnce  sync.Once
	cleanerStopping  atomic.Bool
	cleanThrottle    *partition.Throttle
	maintainDone     chan struct{}
	stopMaintainOnce sync.Once

	// lock holds the data dir's .lock, flocked while the engine is open
	// (released by Close or Kill, or by the process's end).
	lock *os.File
}

// lockFileName is the data dir's lock file, as Kafka's log dirs have one.
const lockFileName = ".lock"

// lockDir takes the data dir's lock without waiting.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFileName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cannot lock data dir: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("cannot open %s: %w", dir, ErrDirLocked)
		}
		return nil, fmt.Errorf("cannot lock data dir: %w", err)
	}
	return f, nil
}

// Open opens (or creates) the engine in dir, opening every partition found
// there, recovering any that was not closed cleanly.
func Open(dir string, opts Options) (*Engine, error) {
	opts = opts.withDefaults()
	// The data dir's entry, and that of every directory made for it, is
	// durable before anything in it is acknowledged: a machine crash after
	// its creation otherwise lost the whole dir, its producer-id block
	// included, and the next run handed out producer ids again.
	if err := fsutil.MkdirAllDurable(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cannot create data dir: %w", err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	pids, err := openPIDAllocator(dir, opts.Logger)
	if err != nil {
		lock.Close()
		return nil, err
	}
	e := &Engine{dir: dir, opts: opts, pids: pids, lock: lock}
	if opts.Cleaner.IOMaxBytesPerSecond > 0 {
		e.cleanThrottle = partition.NewThrottle(opts.Cleaner.IOMaxBytesPerSecond)
	}
	parts := map[string]*Partition{}
	fail := func(err error) (*Engine, error) {
		for _, p := range parts {
			p.close()
		}
		lock.Close()
		return nil, err
	}
	// A topic creation a crash cut short after its intent was durable is
	// finished before its temporary directories could be taken for
	// leftovers.
	if err := finishCreations(dir, opts.Logger); err != nil {
		return fail(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fail(fmt.Errorf("cannot list data dir: %w", err)) // releases the lock
	}
	has := map[*Partition]bool{}
	var found []partitionDir
	for _, ent := range entries {
		if strings.HasPrefix(ent.Name(), createDirPrefix) {
			// A partition whose creation a crash cut short: CreateTopic
			// makes it again.
			_ = os.RemoveAll(filepath.Join(dir, ent.Name()))
			continue
		}
		if isDeleteDir(ent) {
			// A deletion the last process made durable but did not finish
			// (see DeleteTopic); should this fail, the next Open retries.
			_ = os.RemoveAll(filepath.Join(dir, ent.Name()))
			continue
		}
		if !ent.IsDir() {
			continue
		}
		topic, index, ok := parsePartitionName(ent.Name())
		if !ok {
			continue
		}
		found = append(found, partitionDir{name: ent.Name(), topic: topic, index: index})
	}
	opened, err := openPartitions(dir, found, &e.opts, &e.closed)
	for i, o := range opened {
		if o.p != nil {
			parts[found[i].name] = o.p
			has[o.p] = o.hasID
		}
	}
	if err != nil {
		return fail(err)
	}
	for _, p := range parts {
		p.producers.Range(func(pid int64, _ *pidtable.State) bool {
			e.pids.reserveAbove(pid)
			return true
		})
	}
	ids, err := assignTopicIDs(parts, has)
	if err != nil {
		return fail(err)
	}
	if err := reconcileTopicConfigs(parts); err != nil {
		return fail(err)
	}
	e.parts.Store(&parts)
	e.ids.Store(ids)
	if _, ok := parts[partitionKey(txnStateTopic, 0)]; ok {
		// Transactions were used here: the coordinator recovers now, not
		// on first use, so that what the last run decided gets its
		// markers and orphan transactions are ended even if this run
		// never asks for the coordinator. Until then they would pin their
		// partitions' last stable offsets, hiding everything after them
		// from read_committed consumers.
		if _, err := e.coordinator(); err != nil {
			e.Close()
			return nil, fmt.Errorf("cannot recover the transaction coordinator: %w", err)
		}
	}
	// A topic deletion cut short is finished before anything can commit
	// offsets or create topics (DeleteTopic).
	if err := e.finishDeletions(); err != nil {
		e.Close()
		return nil, err
	}
	e.pids.report()
	if e.opts.MaintainInterval > 0 {
		e.stopMaintain, e.maintainDone = make(chan struct{}), make(chan struct{})
		go e.maintain()
		if !e.opts.Cleaner.Disable {
			e.stopCleaner, e.cleanerDone = make(chan struct{}), make(chan struct{})
			go e.runCleaner()
		}
	}
	return e, nil
}

// maintain runs the engine's periodic work (Options.MaintainInterval)
// until Close: without it a transaction whose producer went away would
// never time out in an embedding program, pinning its partitions' last
// stable offset, and producer state would never expire. Failures are
// retried at the next tick; AbortTimedOut keeps what it could not finish.
func (e *Engine) maintain() {
	defer close(e.maintainDone)
	t := time.NewTicker(e.opts.MaintainInterval)
	defer t.Stop()
	lastRetention := time.Now()
	for {
		select {
		case <-e.stopMaintain:
			return
		case <-t.C:
		}
		// Only a coordinator already in use: maintenance does not create
		// the transaction state topic.
		if c := e.coord.Load(); c != nil {
			_, _ = c.AbortTimedOut()
			_, _ = c.ExpireTransactionalIDs()
		}
		e.expireProducers()
		if time.Since(lastRetention) >= e.opts.RetentionInterval {
			lastRetention = time.Now()
			_, _ = e.applyRetention()
		}
	}
}

// stopMaintenance ends maintain and waits for it (before Close or Kill
// take mu: its work takes mu too).
func (e *Engine) stopMaintenance() {
	if e.stopMaintain == nil {
		return
	}
	e.stopMaintainOnce.Do(func() { close(e.stopMaintain) })
	<-e.maintainDone
}

// parsePartitionName splits a partition directory's name into topic and
// index.
func parsePartitionName(name string) (string, int, bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(name[i+1:])
	// Only the name the engine writes: "t-00" or "t-+0" would open as
	// partition 0 under a key lookups never use.
	if err != nil || n < 0 || strconv.Itoa(n) != name[i+1:] || ValidateTopic(name[:i]) != nil {
		return "", 0, false
	}
	return name[:i], n, true
}

func partitionKey(topic string, index int) string { return topic + "-" + strconv.Itoa(index) }

// CreateTopic creates partitions 0..partitions-1 of topic; existing ones
// are kept, so a program may call it at every start. A new topic gets a new
// random topic id; added partitions get the topic's id.
//
// config, if given, holds Kafka topic configs (retention.ms,
// cleanup.policy, ...) that override the engine's options for this topic;
// they are validated as Kafka's broker validates them (an unknown name or a
// bad value is ErrInvalidConfig), stored with each new partition, and kept
// across restarts. Existing partitions keep theirs. Several maps are merged,
// the later winning.
//
// ErrInvalidTopic for a name outside Kafka's rules, ErrInvalidPartitions
// for a count below 1, ErrInternalTopic for the engine's internal topics
// (IsInternalTopic), which it creates itself.
func (e *Engine) CreateTopic(topic string, partitions int, config ...map[string]string) error {
	if IsInternalTopic(topic) {
		return fmt.Errorf("cannot create topic %q: %w", topic, ErrInternalTopic)
	}
	var cfg map[string]string
	switch len(config) {
	case 0:
	case 1:
		cfg = config[0]
	default:
		cfg = map[string]string{}
		for _, c := range config {
			maps.Copy(cfg, c)
		}
	}
	return e.createTopic(topic, partitions, cfg, createAny)
}

// createMode says what createTopic may do.
type createMode int

const (
	createAny createMode = iota // create the topic or add missing partitions (CreateTopic)
	createNew                   // the topic must not exist (Frontend.CreateTopic)
	addOnly                     // the topic must exist and grow (Frontend.AddPartitions)
)

// collisionKey is the name Kafka compares for collisions.
func collisionKey(topic string) string { return strings.ReplaceAll(topic, ".", "_") }

// createTopic holds the engine's topic lock (mu) only to check and
// reserve the creation (planCreation) and to publish its partitions
// (publishCreation), not while it writes and syncs their files: the
// seconds a topic of thousands of partitions takes would otherwise stall
// every other creation, deletion, config change and auto-creation, and
// with them the listener's requests that make one. Creations of one
// topic (or of colliding names) still run one at a time, and a deletion
// or config change of it waits for the creation in progress.
func (e *Engine) createTopic(topic string, partitions int, cfg map[string]string, mode createMode) error {
	if err := ValidateTopic(topic); err != nil {
		return err
	}
	if err := validateTopicConfig(cfg); err != nil {
		return err
	}
	if mode != addOnly && (partitions <= 0 || partitions > 1<<20) {
		return fmt.Errorf("cannot create topic %q with %d partitions: %w", topic, partitions, ErrInvalidPartitions)
	}
	if mode == addOnly {
		e.configMu.Lock() // the topic's configs stay as read below
		defer e.configMu.Unlock()
	}
	plan, err := e.planCreation(topic, partitions, cfg, mode)
	if plan == nil || err != nil {
		return err
	}
	opened, err := e.makePartitions(plan)
	return e.publishCreation(plan, opened, err)
}

// creation is a creation of partitions in progress: its checks passed
// and its capacity is reserved under mu (planCreation); its files are
// being written and its partitions opened without mu (makePartitions).
type creation struct {
	topic   string
	id      [16]byte
	known   bool // the topic existed: its id is in ids already
	cfg     map[string]string
	missing []int // the indexes the engine does not hold
	// done is closed when the creation is published or dropped: an
	// operation on the topic (another creation, a deletion, a config
	// change) waits for it under the same collision key.
	done chan struct{}
}

// waitCreationsLocked waits, under mu (released while it waits), until no
// creation of topic, or of a topic whose name collides with it, is in
// progress: a second creation then sees the first's partitions, a
// deletion deletes them, a config change writes theirs.
func (e *Engine) waitCreationsLocked(topic string) {
	key := collisionKey(topic)
	for {
		c := e.creating[key]
		if c == nil {
			return
		}
		e.mu.Unlock()
		<-c.done
		e.mu.Lock()
	}
}

// planCreation checks a creation and reserves it under mu: the topic's
// collision key (so that creations of one topic run one at a time), its
// id and its partitions' share of the capacity. It returns nil and no
// error when there is nothing to create.
func (e *Engine) planCreation(topic string, partitions int, cfg map[string]string, mode createMode) (*creation, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.waitCreationsLocked(topic)
	if e.closed.Load() {
		return nil, ErrClosed
	}
	ids := e.ids.Load()
	parts := *e.parts.Load()
	id, known := ids.byName[topic]
	if mode == addOnly {
		p0 := parts[partitionKey(topic, 0)]
		switch {
		case !known || p0 == nil:
			return nil, fmt.Errorf("cannot add partitions to %q: %w", topic, ErrUnknownTopicOrPartition)
		case IsInternalTopic(topic):
			return nil, fmt.Errorf("cannot add partitions to internal topic %q: %w", topic, ErrInvalidTopic)
		}
		cur := 0
		for parts[partitionKey(topic, cur)] != nil {
			cur++
		}
		if partitions <= cur || partitions > 1<<20 {
			return nil, fmt.Errorf("cannot raise topic %q from %d to %d partitions: %w", topic, cur, partitions, ErrInvalidPartitions)
		}
		cfg = p0.settings.Load().config
	}
	if mode == createNew {
		if known {
			return nil, fmt.Errorf("cannot create topic %q: %w", topic, ErrTopicAlreadyExists)
		}
		key := collisionKey(topic)
		for other := range ids.byName {
			if collisionKey(other) == key {
				return nil, fmt.Errorf("cannot create topic %q: it collides with %q ('.' and '_' are alike): %w", topic, other, ErrInvalidTopic)
			}
		}
	}
	if !known {
		// Not the id of a topic being created either.
		taken := ids.byID
		if len(e.creating) > 0 {
			taken = maps.Clone(ids.byID)
			for _, c := range e.creating {
				taken[c.id] = c.topic
			}
		}
		var err error
		if id, err = newTopicID(taken); err != nil {
			return nil, err
		}
	}
	var missing []int
	for i := range partitions {
		if parts[partitionKey(topic, i)] == nil {
			missing = append(missing, i)
		}
	}
	if len(missing) == 0 {
		return nil, nil
	}
	// Before anything is created, or even looked for on disk: a request
	// the machine cannot hold is refused whole, leaving the engine as it
	// was. The partitions of creations in progress count as created.
	if err := e.checkCapacity(topic, len(parts), e.reserved, len(missing)); err != nil {
		return nil, err
	}
	c := &creation{topic: topic, id: id, known: known, cfg: cfg, missing: missing, done: make(chan struct{})}
	if e.creating == nil {
		e.creating = map[string]*creation{}
	}
	e.creating[collisionKey(topic)] = c
	e.reserved += len(missing)
	e.creations.Add(1)
	return c, nil
}

// makePartitions writes the directories of c's new partitions and opens
// every partition it adds, without mu. On error it returns those it
// opened before the failure, which are kept.
func (e *Engine) makePartitions(c *creation) ([]*Partition, error) {
	exists, err := e.existingDirs(c.topic, c.missing)
	if err != nil {
		return nil, err
	}
	var newIndexes []int
	for _, i := range c.missing {
		if !exists[i] {
			newIndexes = append(newIndexes, i)
		}
	}
	made := map[int]bool{}
	if len(newIndexes) > 0 {
		var created []string
		created, err = createPartitionDirs(e.dir, c.topic, newIndexes, c.cfg, c.id, &e.opts.private)
		// On error only the directories created are opened below;
		// CreateTopic again makes the rest.
		for _, key := range created {
			_, i, _ := parsePartitionName(key)
			made[i] = true
		}
	}
	var opened []*Partition
	for _, i := range c.missing {
		key := partitionKey(c.topic, i)
		dir := filepath.Join(e.dir, key)
		if made[i] {
			p, oerr := newPartition(dir, c.topic, i, c.cfg, c.id, &e.opts, &e.closed)
			if oerr != nil {
				err = errors.Join(err, oerr)
				break
			}
			opened = append(opened, p)
			continue
		}
		if !exists[i] {
			continue // its creation failed
		}
		// A directory the engine does not hold (left by an earlier
		// creation that failed half way, or made behind its back).
		p, hasID, oerr := openPartition(dir, c.topic, i, &e.opts, &e.closed)
		if oerr != nil {
			err = errors.Join(err, oerr)
			break
		}
		if hasID && p.topicID != c.id {
			// Only a directory made behind the engine's back can hold
			// another id: refuse rather than mix two topics.
			err = errors.Join(err, fmt.Errorf("cannot create %s: it holds topic id %s, the topic's is %s", key, topicIDString(p.topicID), topicIDString(c.id)))
			p.close()
			break
		}
		if !hasID {
			if werr := writePartitionMetadata(dir, c.id); werr != nil {
				err = errors.Join(err, werr)
				p.close()
				break
			}
		}
		p.topicID = c.id
		opened = append(opened, p)
	}
	return opened, err
}

// existingDirs reports which of topic's partitions indexes have a
// directory in the data dir: with a stat each for a few, with one listing
// of the data dir for many.
func (e *Engine) existingDirs(topic string, indexes []int) (map[int]bool, error) {
	exists := map[int]bool{}
	if len(indexes) < 64 {
		for _, i := range indexes {
			if _, err := os.Stat(filepath.Join(e.dir, partitionKey(topic, i))); !os.IsNotExist(err) {
				exists[i] = true
			}
		}
		return exists, nil
	}
	d, err := os.Open(e.dir)
	if err != nil {
		return nil, fmt.Errorf("cannot list data dir: %w", err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, fmt.Errorf("cannot list data dir: %w", err)
	}
	want := make(map[int]bool, len(indexes))
	for _, i := range indexes {
		want[i] = true
	}
	for _, name := range names {
		if t, i, ok := parsePartitionName(name); ok && t == topic && want[i] {
			exists[i] = true
		}
	}
	return exists, nil
}

// publishCreation makes c's opened partitions visible under mu and ends
// the creation. Partitions created before a failure are kept (Close
// closes them); CreateTopic again adds the rest. An engine closed
// meanwhile gets none: they are closed, their directories stay for the
// next Open.
func (e *Engine) publishCreation(c *creation, opened []*Partition, err error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.creating, collisionKey(c.topic))
	e.reserved -= len(c.missing)
	close(c.done)
	defer e.creations.Done()
	if e.closed.Load() {
		for _, p := range opened {
			_ = p.close()
		}
		return errors.Join(err, ErrClosed)
	}
	if len(opened) > 0 {
		parts := maps.Clone(*e.parts.Load())
		for _, p := range opened {
			parts[partitionKey(c.topic, p.index)] = p
		}
		e.parts.Store(&parts)
		if !c.known {
			e.ids.Store(e.ids.Load().with(c.topic, c.id))
		}
	}
	return err
}

// Partition returns a partition, or ErrUnknownTopicOrPartition.
func (e *Engine) Partition(topic string, index int) (*Partition, error) {
	// The key is built on the stack for short names; the map lookup with a
	// string conversion of a byte slice does not allocate.
	var buf [64]byte
	if index < 0 {
		// "t" and -1 would make the key "t--1": partition 1 of topic "t-".
		return nil, fmt.Errorf("cannot find partition %d of topic %q: %w", index, topic, ErrUnknownTopicOrPartition)
	}
	key := strconv.AppendInt(append(append(buf[:0], topic...), '-'), int64(index), 10)
	if p := (*e.parts.Load())[string(key)]; p != nil {
		return p, nil
	}
	return nil, fmt.Errorf("cannot find partition %d of topic %q: %w", index, topic, ErrUnknownTopicOrPartition)
}

// Topics returns the topics and their partition counts.
func (e *Engine) Topics() map[string]int {
	out := map[string]int{}
	for _, p := range *e.parts.Load() {
		out[p.topic] = max(out[p.topic], p.index+1)
	}
	return out
}

// Partitions returns every partition, ordered by topic and index.
func (e *Engine) Partitions() []*Partition {
	var out []*Partition
	for _, p := range *e.parts.Load() {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].topic != out[j].topic {
			return out[i].topic < out[j].topic
		}
		return out[i].index < out[j].index
	})
	return out
}

// initProducerID: see Frontend.InitProducerID.
func (e *Engine) initProducerID() (pid int64, epoch int16, err error) {
	pid, err = e.pids.allocate()
	return pid, 0, err
}

// expireProducers applies producer-id expiry to every partition.
func (e *Engine) expireProducers() int {
	n := 0
	for _, p := range *e.parts.Load() {
		n += p.expireProducers()
	}
	return n
}

// Close closes every partition cleanly (snapshots, clean-shutdown markers).
func (e *Engine) Close() error {
	e.stopCleaning()
	e.stopMaintenance()
	e.mu.Lock()
	// Stored before any log closes: an append that fails on a closed log
	// then sees the flag and reports ErrClosed.
	if e.closed.Swap(true) {
		e.mu.Unlock()
		return ErrClosed
	}
	// A creation in progress writes in the data dir without mu: it ends,
	// finding the engine closed, before the lock is released.
	e.mu.Unlock()
	e.creations.Wait()
	e.mu.Lock()
	defer e.mu.Unlock()
	errs := closePartitions(*e.parts.Load())
	// No producer id may be handed out once the lock is released: another
	// engine may be handing out the same ones.
	e.pids.close()
	errs = append(errs, e.lock.Close())
	return errors.Join(errs...)
}

// kill stops every partition as a crash would (see partition.Log.Kill): for
// crash tests that reopen the data directory in the same process, through
// package internal/enginekill (a test's hook, not the embedding API).
func (e *Engine) kill() {
	e.stopCleaning()
	e.stopMaintenance()
	e.mu.Lock()
	wasClosed := e.closed.Swap(true)
	e.mu.Unlock()
	e.creations.Wait() // as Close: none writes once the lock is released
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, p := range *e.parts.Load() {
		p.log.Kill()
	}
	e.pids.close()
	if !wasClosed {
		// A crash's end releases the lock too.
		_ = e.lock.Close()
	}
}

func init() {
	enginekill.Register(func(e any) { e.(*Engine).kill() })
}
