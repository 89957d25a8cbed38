package powercut

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/partition"
)

// Counts are a campaign's figures: what was done and, per failure class,
// how often the checks found it.
type Counts struct {
	Trials, Cuts, TornCuts, Checks int
	// Acked counts acknowledged batches (raw appends and transactional
	// sends), retries and duplicates included.
	Acked int

	// Lost: an acknowledged batch missing from its offset (above the log
	// start, in a topic not deleted).
	Lost int
	// LostBeyondBound: losses past what the policy allows: under
	// interval=D a batch acknowledged more than D (plus slack) before the
	// kill; under bytes=N more than N bytes (plus slack) of one
	// partition's batches acknowledged in one stage.
	LostBeyondBound int
	// LostAfterClose: a batch found at an earlier check, after which the
	// checker closed the engine cleanly (everything synced), missing at
	// a later one.
	LostAfterClose int
	// Mismatched: a batch at an acknowledged offset with the same
	// producer id, epoch and sequence but other bytes.
	Mismatched int
	// Duplicated: extra copies of one (producer id, epoch, sequence) in a
	// partition.
	Duplicated int
	// RetryMoved: a retry of a batch found in the log at the last check
	// answered with other offsets than the original's.
	RetryMoved int
	// Atomicity: a transaction read_committed shows other than its
	// outcome demands (committed: all of it; aborted or never ended:
	// none; commit in doubt: all or none), or offsets committed by a
	// transaction that did not commit.
	Atomicity int
	// CommitsLost: a group's committed offset below its last
	// acknowledged commit.
	CommitsLost int
	// KeysLost: a key of the compacted topic whose newest value is older
	// than its last acknowledged one (or a value never sent).
	KeysLost int
	// SwapsCut: partitions whose crash image held a cleaning's swap cut
	// short (completed or rolled back before the checks).
	SwapsCut int
	// TopicsLost / TopicsBack: a created topic gone / a deleted topic
	// back; DeletesUndone: a log start below an acknowledged
	// DeleteRecords.
	TopicsLost, TopicsBack, DeletesUndone int
	// WedgedIDs: a transactional id not re-initialisable within the
	// bound; PinnedLSOs: a partition whose last stable offset stays below
	// its high watermark once every id was re-initialised; Unstable: a
	// require-stable offset fetch refused after that.
	WedgedIDs, PinnedLSOs, Unstable int
	// OpenFailures: engine.Open failed after a cut; CheckFailures: the
	// checker did not finish.
	OpenFailures, CheckFailures int
	// PIDReused: a producer id handed to two owners; EpochRegressed: a
	// transactional id re-initialised at or below an epoch it had used.
	PIDReused, EpochRegressed int
	// VerifyOK / VerifyCorrupt: logdump.Verify's verdicts on crash images.
	VerifyOK, VerifyCorrupt int
	// WorkloadErrors: calls of the workload that failed (reported, not a
	// failure class by themselves).
	WorkloadErrors int
	// What the disk was asked to do: evidence that the trials went
	// through the paths the model must get right.
	FileSyncs, DirSyncs, Renames, Allocates, TornPages int64
}

// Add adds o to c.
func (c *Counts) Add(o Counts) {
	c.Trials += o.Trials
	c.Cuts += o.Cuts
	c.TornCuts += o.TornCuts
	c.Checks += o.Checks
	c.Acked += o.Acked
	c.Lost += o.Lost
	c.LostBeyondBound += o.LostBeyondBound
	c.LostAfterClose += o.LostAfterClose
	c.Mismatched += o.Mismatched
	c.Duplicated += o.Duplicated
	c.RetryMoved += o.RetryMoved
	c.Atomicity += o.Atomicity
	c.CommitsLost += o.CommitsLost
	c.KeysLost += o.KeysLost
	c.SwapsCut += o.SwapsCut
	c.TopicsLost += o.TopicsLost
	c.TopicsBack += o.TopicsBack
	c.DeletesUndone += o.DeletesUndone
	c.WedgedIDs += o.WedgedIDs
	c.PinnedLSOs += o.PinnedLSOs
	c.Unstable += o.Unstable
	c.OpenFailures += o.OpenFailures
	c.CheckFailures += o.CheckFailures
	c.PIDReused += o.PIDReused
	c.EpochRegressed += o.EpochRegressed
	c.VerifyOK += o.VerifyOK
	c.VerifyCorrupt += o.VerifyCorrupt
	c.WorkloadErrors += o.WorkloadErrors
	c.FileSyncs += o.FileSyncs
	c.DirSyncs += o.DirSyncs
	c.Renames += o.Renames
	c.Allocates += o.Allocates
	c.TornPages += o.TornPages
}

func (c Counts) String() string {
	return fmt.Sprintf("trials %d, cuts %d (torn %d), checks %d, acked batches %d, lost %d (beyond the policy's bound %d, after a clean close %d), mismatched %d, duplicated %d, "+
		"retries moved %d, atomicity %d, commits lost %d, keys lost %d, topics lost %d, topics back %d, deletes undone %d, "+
		"wedged ids %d, pinned LSOs %d, unstable offsets %d, open failures %d, check failures %d, "+
		"pids reused %d, epochs regressed %d, verify ok %d, verify corrupt %d, workload errors %d; "+
		"disk: file syncs %d, dir syncs %d, renames %d, fallocates %d, torn pages kept %d, cleaning swaps cut %d",
		c.Trials, c.Cuts, c.TornCuts, c.Checks, c.Acked, c.Lost, c.LostBeyondBound, c.LostAfterClose, c.Mismatched, c.Duplicated,
		c.RetryMoved, c.Atomicity, c.CommitsLost, c.KeysLost, c.TopicsLost, c.TopicsBack, c.DeletesUndone,
		c.WedgedIDs, c.PinnedLSOs, c.Unstable, c.OpenFailures, c.CheckFailures,
		c.PIDReused, c.EpochRegressed, c.VerifyOK, c.VerifyCorrupt, c.WorkloadErrors,
		c.FileSyncs, c.DirSyncs, c.Renames, c.Allocates, c.TornPages, c.SwapsCut)
}

// Promise is one row of the table of what a sync policy promises across a
// power cut: the failure classes that must stay at zero.
type Promise struct {
	Class string
	Count func(Counts) int
	// Applies says under which policies the class must stay at zero.
	Applies func(partition.SyncPolicy) bool
}

func everyPolicy(partition.SyncPolicy) bool { return true }

func alwaysOnly(p partition.SyncPolicy) bool { return p.Kind == partition.SyncAlways }

func bounded(p partition.SyncPolicy) bool {
	return p.Kind == partition.SyncInterval || p.Kind == partition.SyncBytes
}

// Promises is the table the harness asserts (docs/DURABILITY.md). Under
// every policy a power cut may not duplicate, alter or corrupt what it
// keeps, lose what a clean close synced, wedge an id, pin a partition,
// fail an open or reuse a producer id; under interval and bytes it may
// lose only the policy's bound; under always it may not lose anything
// acknowledged: batches, transaction outcomes, committed offsets, topic
// creations and deletions, DeleteRecords.
var Promises = []Promise{
	{"duplicated", func(c Counts) int { return c.Duplicated }, everyPolicy},
	{"mismatched", func(c Counts) int { return c.Mismatched }, everyPolicy},
	{"retries moved", func(c Counts) int { return c.RetryMoved }, everyPolicy},
	{"wedged ids", func(c Counts) int { return c.WedgedIDs }, everyPolicy},
	{"pinned LSOs", func(c Counts) int { return c.PinnedLSOs }, everyPolicy},
	{"unstable offsets", func(c Counts) int { return c.Unstable }, everyPolicy},
	{"open failures", func(c Counts) int { return c.OpenFailures }, everyPolicy},
	{"check failures", func(c Counts) int { return c.CheckFailures }, everyPolicy},
	{"pids reused", func(c Counts) int { return c.PIDReused }, everyPolicy},
	{"verify corrupt", func(c Counts) int { return c.VerifyCorrupt }, everyPolicy},
	{"lost after a clean close", func(c Counts) int { return c.LostAfterClose }, everyPolicy},
	{"lost beyond the bound", func(c Counts) int { return c.LostBeyondBound }, bounded},
	{"lost", func(c Counts) int { return c.Lost }, alwaysOnly},
	{"atomicity", func(c Counts) int { return c.Atomicity }, alwaysOnly},
	{"commits lost", func(c Counts) int { return c.CommitsLost }, alwaysOnly},
	{"keys lost", func(c Counts) int { return c.KeysLost }, alwaysOnly},
	{"topics lost", func(c Counts) int { return c.TopicsLost }, alwaysOnly},
	{"topics back", func(c Counts) int { return c.TopicsBack }, alwaysOnly},
	{"deletes undone", func(c Counts) int { return c.DeletesUndone }, alwaysOnly},
	{"epochs regressed", func(c Counts) int { return c.EpochRegressed }, alwaysOnly},
}

// Broken returns the promises of policy that c breaks, as "class N".
func Broken(policy partition.SyncPolicy, c Counts) []string {
	var out []string
	for _, p := range Promises {
		if !p.Applies(policy) {
			continue
		}
		if n := p.Count(c); n != 0 {
			out = append(out, fmt.Sprintf("%s %d", p.Class, n))
		}
	}
	return out
}

type tpKey struct {
	topic string
	part  int
}

func (k tpKey) String() string { return k.topic + "/" + strconv.Itoa(k.part) }

// sent is an appended batch: raw, its bytes, or, for a batch sent
// through engine.Producer (which builds the bytes), nil and what the
// acknowledgement says: the producer and the offsets.
type sent struct {
	tp      tpKey
	raw     []byte
	last    int64
	pid     int64
	epoch   int16
	acked   bool
	base    int64
	dup     bool
	lost    bool // counted lost once; not counted again
	present bool // found at base at the last check
	// closed: found at a check, whose clean Close synced it.
	closed   bool
	ackAt    time.Time
	idem     bool // from an idempotent producer: retried next stage
	retryOf  *sent
	producer string
	stage    int
}

type txnSend struct {
	tp         tpKey
	base, last int64
	pid        int64
	epoch      int16
}

type txnOffset struct {
	group string
	tp    tpKey
	value int64
}

type txn struct {
	id, no  string
	sends   []txnSend
	offsets []txnOffset
	end     string // "", "commit" or "abort": what was asked
	done    bool   // ... and acknowledged
	// outcome is fixed by the first check that could see it: "commit" or
	// "abort".
	outcome string
}

// Ledger is the parent's record of one trial: everything the children
// acknowledged, compared with what each check finds.
type Ledger struct {
	Policy partition.SyncPolicy
	Counts Counts
	// Failures describes each failure found, for the test log.
	Failures []string

	stage    int
	sends    map[int64]*sent
	order    []*sent
	txns     map[string]*txn
	txnOrder []*txn
	// commits: per group and partition, the values asked and acknowledged.
	committing map[string]map[int64]bool
	committed  map[string]int64
	pids       map[int64]string
	idEpoch    map[string][2]int64 // id -> {pid, highest epoch used}
	created    map[string]bool
	deleting   map[string]bool
	deleted    map[string]bool
	delrec     map[tpKey]int64
	// lastRaw: per idempotent producer and partition, its last batch.
	lastRaw map[string]*sent
	// byRaw: the first send of each idempotent batch, by its bytes.
	byRaw map[string]*sent
	// kvAcked and kvSent: per key of the compacted topic, the highest
	// sequence acknowledged and sent.
	kvAcked, kvSent map[string]int64
	// killedAt: when the last workload was killed.
	killedAt time.Time
	// lostBytes: per partition, the bytes of this stage's batches found
	// lost by the current check.
	lostBytes map[tpKey]int64
}

// Killed records when the workload was killed: the interval bound counts
// back from there.
func (l *Ledger) Killed(at time.Time) { l.killedAt = at }

// NewLedger returns an empty ledger.
func NewLedger(policy partition.SyncPolicy) *Ledger {
	return &Ledger{Policy: policy, sends: map[int64]*sent{}, txns: map[string]*txn{},
		committing: map[string]map[int64]bool{}, committed: map[string]int64{}, pids: map[int64]string{},
		idEpoch: map[string][2]int64{}, created: map[string]bool{}, deleting: map[string]bool{},
		deleted: map[string]bool{}, delrec: map[tpKey]int64{}, lastRaw: map[string]*sent{}, byRaw: map[string]*sent{},
		kvAcked: map[string]int64{}, kvSent: map[string]int64{}}
}

func (l *Ledger) fail(format string, args ...any) {
	if len(l.Failures) < 200 {
		l.Failures = append(l.Failures, fmt.Sprintf("stage %d: ", l.stage)+fmt.Sprintf(format, args...))
	}
}

// Stage starts a workload stage.
func (l *Ledger) Stage(n int) { l.stage = n }

func atoi(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

func (l *Ledger) txn(id, no string) *txn {
	k := id + "/" + no
	t := l.txns[k]
	if t == nil {
		t = &txn{id: id, no: no}
		l.txns[k] = t
		l.txnOrder = append(l.txnOrder, t)
	}
	return t
}

// Feed records one line of a workload or recovery child. It returns the
// failure text of an "openfail" line, "" otherwise.
func (l *Ledger) Feed(line string) string {
	f := strings.Fields(line)
	if len(f) == 0 {
		return ""
	}
	switch f[0] {
	case "openfail":
		return strings.Join(f[1:], " ")
	case "error":
		l.Counts.WorkloadErrors++
		if l.Counts.WorkloadErrors <= 5 {
			l.Failures = append(l.Failures, fmt.Sprintf("stage %d: workload error (not a failure by itself): %s", l.stage, line))
		}
	case "topic":
		l.created[f[1]] = true
	case "topicdeleting":
		l.deleting[f[1]] = true
	case "topicdel":
		l.deleted[f[1]] = true
	case "pid":
		l.pid(atoi(f[1]), int16(atoi(f[2])), f[3])
	case "send":
		raw, _ := hex.DecodeString(f[4])
		s := &sent{tp: tpKey{f[2], int(atoi(f[3]))}, raw: raw, stage: l.stage}
		if b := batch.Batch(raw); len(raw) >= batch.HeaderSize && b.HasProducerID() && !b.IsTransactional() {
			s.idem = true
			s.producer = strconv.FormatInt(b.ProducerID(), 10) + "/" + s.tp.String()
			if prev := l.byRaw[string(raw)]; prev != nil {
				s.retryOf = prev
			} else {
				l.byRaw[string(raw)] = s
			}
			l.lastRaw[s.producer] = s
		}
		l.sends[atoi(f[1])] = s
		l.order = append(l.order, s)
	case "ack":
		s := l.sends[atoi(f[1])]
		if s == nil {
			break
		}
		s.acked, s.base, s.dup, s.ackAt = true, atoi(f[2]), f[4] == "1", time.Now()
		l.Counts.Acked++
		// A retry must get the original's offsets whenever the original
		// is known to be in the log: acknowledged in this stage (no cut
		// since), or found by the last check.
		if o := s.retryOf; o != nil && o.acked && (o.present || o.stage == l.stage) && o.base != s.base {
			l.Counts.RetryMoved++
			l.fail("retry of the batch at %s@%d answered at %d (duplicate %v)", s.tp, o.base, s.base, s.dup)
		}
	case "psend":
		s := &sent{tp: tpKey{f[1], int(atoi(f[2]))}, acked: true, base: atoi(f[3]), last: atoi(f[4]),
			pid: atoi(f[5]), epoch: int16(atoi(f[6])), stage: l.stage, ackAt: time.Now()}
		l.order = append(l.order, s)
		l.Counts.Acked++
	case "txsend":
		t := l.txn(f[1], f[2])
		t.sends = append(t.sends, txnSend{tp: tpKey{f[3], int(atoi(f[4]))}, base: atoi(f[5]), last: atoi(f[6]),
			pid: atoi(f[7]), epoch: int16(atoi(f[8]))})
		if f[1] != TxnIDs[2] {
			l.Counts.Acked++ // the v1 id's sends are counted by their ack
		}
		l.useEpoch(f[1], atoi(f[7]), atoi(f[8]))
	case "txoffsets":
		t := l.txn(f[1], f[2])
		t.offsets = append(t.offsets, txnOffset{group: f[3], tp: tpKey{f[4], int(atoi(f[5]))}, value: atoi(f[6])})
	case "txend":
		l.txn(f[1], f[2]).end = f[3]
	case "txdone":
		l.txn(f[1], f[2]).done = true
	case "committing":
		k := f[1] + "/" + f[2] + "/" + f[3]
		if l.committing[k] == nil {
			l.committing[k] = map[int64]bool{}
		}
		l.committing[k][atoi(f[4])] = true
	case "commit":
		k := f[1] + "/" + f[2] + "/" + f[3]
		l.committed[k] = max(l.committed[k], atoi(f[4]))
	case "kvsend":
		l.kvSent[f[1]] = max(l.kvSent[f[1]], atoi(f[2]))
	case "kvack":
		l.kvAcked[f[1]] = max(l.kvAcked[f[1]], atoi(f[2]))
	case "delrec":
		k := tpKey{f[1], int(atoi(f[2]))}
		l.delrec[k] = max(l.delrec[k], atoi(f[3]))
	}
	return ""
}

func (l *Ledger) pid(pid int64, epoch int16, owner string) {
	if old, ok := l.pids[pid]; ok && old != owner {
		l.Counts.PIDReused++
		l.fail("producer id %d handed to %s, already %s's", pid, owner, old)
		return
	}
	l.pids[pid] = owner
	if id, ok := strings.CutPrefix(owner, "tx/"); ok {
		l.useEpoch(id, pid, int64(epoch))
	}
}

func (l *Ledger) useEpoch(id string, pid, epoch int64) {
	cur, ok := l.idEpoch[id]
	if !ok || cur[0] != pid || epoch > cur[1] {
		l.idEpoch[id] = [2]int64{pid, epoch}
	}
}

// Retries returns, one "topic partition hex" line each, the last batch
// every idempotent producer sent to every partition: the next stage sends
// them again first.
func (l *Ledger) Retries() []string {
	var out []string
	for _, s := range l.lastRaw {
		if s.tp.topic == topicIdem || s.tp.topic == topicRetention {
			out = append(out, fmt.Sprintf("%s %d %s", s.tp.topic, s.tp.part, hex.EncodeToString(s.raw)))
		}
	}
	sort.Strings(out)
	l.lastRaw = map[string]*sent{}
	return out
}

type partState struct {
	start, hw, lso int64
	batches        map[int64]batch.Batch
	visible        [][2]int64
}

func (p *partState) isVisible(first, last int64) (all, none bool) {
	all, none = true, true
	for o := first; o <= last; o++ {
		in := false
		for _, r := range p.visible {
			if o >= r[0] && o <= r[1] {
				in = true
				break
			}
		}
		all = all && in
		none = none && !in
	}
	return all, none
}

// Check compares a checker's report with the ledger. It returns false
// when the checker could not open the data dir (the trial ends there).
func (l *Ledger) Check(lines []string) bool {
	l.Counts.Checks++
	parts := map[tpKey]*partState{}
	offsets := map[string]int64{}
	topics := map[string]bool{}
	kv := map[string]int64{}
	done := false
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "verify":
			switch f[1] {
			case "ok":
				l.Counts.VerifyOK++
			case "absent":
			default:
				l.Counts.VerifyCorrupt++
				l.fail("verify calls the crash image corrupt: %s", strings.Join(f[2:], " "))
			}
		case "openfail":
			l.Counts.OpenFailures++
			l.fail("open after the cut failed: %s", strings.Join(f[1:], " "))
			return false
		case "wedged":
			l.Counts.WedgedIDs++
			l.fail("transactional id %s not re-initialisable: %s", f[1], strings.Join(f[2:], " "))
		case "reinit":
			pid, epoch := atoi(f[2]), atoi(f[3])
			if cur, ok := l.idEpoch[f[1]]; ok && cur[0] == pid && epoch <= cur[1] {
				l.Counts.EpochRegressed++
				l.fail("transactional id %s re-initialised at %d/%d, but it used epoch %d", f[1], pid, epoch, cur[1])
			}
			l.pid(pid, int16(epoch), "tx/"+f[1])
		case "pinned":
			l.Counts.PinnedLSOs++
			l.fail("partition %s/%s: last stable offset %s stays below high watermark %s", f[1], f[2], f[3], f[4])
		case "unstable":
			l.Counts.Unstable++
			l.fail("group %s: require-stable fetch refused: %s", f[1], strings.Join(f[2:], " "))
		case "part":
			topics[f[1]] = true
			parts[tpKey{f[1], int(atoi(f[2]))}] = &partState{start: atoi(f[3]), hw: atoi(f[4]), lso: atoi(f[5]),
				batches: map[int64]batch.Batch{}}
		case "batch":
			raw, _ := hex.DecodeString(f[3])
			if p := parts[tpKey{f[1], int(atoi(f[2]))}]; p != nil && len(raw) >= batch.HeaderSize {
				p.batches[batch.Batch(raw).BaseOffset()] = raw
			}
		case "visible":
			p := parts[tpKey{f[1], int(atoi(f[2]))}]
			if p == nil || f[3] == "none" {
				continue
			}
			for _, r := range strings.Split(f[3], ",") {
				a, b, _ := strings.Cut(r, "-")
				p.visible = append(p.visible, [2]int64{atoi(a), atoi(b)})
			}
		case "offset":
			offsets[f[1]+"/"+f[2]+"/"+f[3]] = atoi(f[4])
		case "kv":
			kv[f[1]] = atoi(f[2])
		case "swaps":
			l.Counts.SwapsCut += int(atoi(f[1]))
		case "pid":
			l.pid(atoi(f[1]), int16(atoi(f[2])), fmt.Sprintf("check/%d", l.Counts.Checks))
		case "error":
			l.fail("checker: %s", line)
		case "done":
			done = true
		}
	}
	if !done {
		l.Counts.CheckFailures++
		l.fail("checker did not finish")
		return false
	}
	l.checkDuplicates(parts)
	l.checkBatches(parts, topics)
	l.checkTxns(parts, offsets)
	l.checkCommits(offsets)
	l.checkKeys(kv)
	if l.Policy.Kind == partition.SyncAlways {
		for name := range l.created {
			if !topics[name] && !l.deleting[name] {
				l.Counts.TopicsLost++
				l.fail("topic %s created, not deleted, but gone", name)
				l.created[name] = false
			}
		}
		for name := range l.deleted {
			if topics[name] {
				l.Counts.TopicsBack++
				l.fail("topic %s deleted but back", name)
				delete(l.deleted, name)
			}
		}
		for k, low := range l.delrec {
			if p := parts[k]; p != nil && p.start < low {
				l.Counts.DeletesUndone++
				l.fail("partition %s starts at %d, below the acknowledged DeleteRecords to %d", k, p.start, low)
				delete(l.delrec, k)
			}
		}
	}
	return true
}

type seqKey struct {
	pid   int64
	epoch int16
	seq   int32
}

func (l *Ledger) checkDuplicates(parts map[tpKey]*partState) {
	for k, p := range parts {
		seen := map[seqKey]int64{}
		for base, b := range p.batches {
			if !b.HasProducerID() || b.IsControl() {
				continue
			}
			sk := seqKey{b.ProducerID(), b.ProducerEpoch(), b.BaseSequence()}
			if other, ok := seen[sk]; ok {
				l.Counts.Duplicated++
				l.fail("partition %s: producer %d epoch %d sequence %d written twice, at %d and %d", k, sk.pid, sk.epoch, sk.seq, other, base)
				continue
			}
			seen[sk] = base
		}
	}
}

// sameBatch compares a stored batch with the bytes sent: everything but
// the base offset and the partition leader epoch, which the log stamps.
func sameBatch(stored, sent []byte) bool {
	return len(stored) == len(sent) && bytes.Equal(stored[8:12], sent[8:12]) && bytes.Equal(stored[16:], sent[16:])
}

func (l *Ledger) checkBatches(parts map[tpKey]*partState, topics map[string]bool) {
	l.lostBytes = map[tpKey]int64{}
	defer func() {
		for k, n := range l.lostBytes {
			if n > l.Policy.Bytes+bytesSlack {
				l.Counts.LostBeyondBound++
				l.fail("partition %s lost %d bytes of batches acknowledged in this stage under %s", k, n, l.Policy)
			}
		}
	}()
	for _, s := range l.order {
		s.present = false
		if !s.acked || s.lost {
			continue
		}
		p := parts[s.tp]
		if p == nil {
			if l.deleting[s.tp.topic] || l.deleted[s.tp.topic] {
				continue
			}
			if !topics[s.tp.topic] {
				l.lose(s, "its topic is gone")
			}
			continue
		}
		if s.base < p.start {
			continue // deleted by DeleteRecords or retention
		}
		b, ok := p.batches[s.base]
		if s.raw == nil {
			if ok && b.HasProducerID() && b.ProducerID() == s.pid && b.ProducerEpoch() == s.epoch && b.LastOffset() == s.last {
				s.present, s.closed = true, true
			} else if ok {
				l.lose(s, fmt.Sprintf("another batch (producer %d) is there", b.ProducerID()))
			} else {
				l.lose(s, fmt.Sprintf("no batch there (log start %d, high watermark %d)", p.start, p.hw))
			}
			continue
		}
		switch {
		case ok && sameBatch(b, s.raw):
			s.present = true
			s.closed = true
		case ok && b.HasProducerID() && b.ProducerID() == batch.Batch(s.raw).ProducerID() &&
			b.ProducerEpoch() == batch.Batch(s.raw).ProducerEpoch() && b.BaseSequence() == batch.Batch(s.raw).BaseSequence():
			l.Counts.Mismatched++
			l.fail("partition %s: batch at %d has the acknowledged batch's producer and sequence but other bytes", s.tp, s.base)
			s.lost = true
		case ok:
			l.lose(s, fmt.Sprintf("another batch (producer %d) is there", b.ProducerID()))
		default:
			l.lose(s, fmt.Sprintf("no batch there (log start %d, high watermark %d)", p.start, p.hw))
		}
	}
}

func (l *Ledger) lose(s *sent, why string) {
	s.lost = true
	l.Counts.Lost++
	switch {
	case s.closed:
		l.Counts.LostAfterClose++
		l.fail("batch at %s@%d, there at an earlier check (then synced by a clean close), lost: %s", s.tp, s.base, why)
	case l.Policy.Kind == partition.SyncAlways:
		l.fail("acknowledged batch lost at %s@%d: %s", s.tp, s.base, why)
	case l.Policy.Kind == partition.SyncInterval && s.stage == l.stage && !l.killedAt.IsZero() &&
		l.killedAt.Sub(s.ackAt) > l.Policy.Interval+intervalSlack:
		l.Counts.LostBeyondBound++
		l.fail("batch at %s@%d acknowledged %v before the kill lost under %s", s.tp, s.base, l.killedAt.Sub(s.ackAt), l.Policy)
	case l.Policy.Kind == partition.SyncBytes && s.stage == l.stage:
		l.lostBytes[s.tp] += int64(len(s.raw))
	}
}

// Slack on the interval and bytes bounds: the background sync's own
// duration on a loaded machine, and the appends concurrent with a sync
// (at most a few batches of a few KiB per partition in this workload).
const (
	intervalSlack = 1500 * time.Millisecond
	bytesSlack    = 32 << 10
)

func (l *Ledger) checkTxns(parts map[tpKey]*partState, offsets map[string]int64) {
	always := l.Policy.Kind == partition.SyncAlways
	offsetOwner := map[string]*txn{}
	for _, t := range l.txnOrder {
		for _, o := range t.offsets {
			offsetOwner[o.group+"/"+o.tp.topic+"/"+strconv.Itoa(o.tp.part)+"@"+strconv.FormatInt(o.value, 10)] = t
		}
		if len(t.sends) == 0 {
			continue
		}
		var all, none, seen = true, true, false
		for _, s := range t.sends {
			p := parts[s.tp]
			// Below the log start the records are gone; at or above a
			// pinned last stable offset read_committed cannot show them
			// yet, which PinnedLSOs counts.
			if p == nil || s.base < p.start || (p.lso < p.hw && s.last >= p.lso) {
				continue
			}
			seen = true
			a, n := p.isVisible(s.base, s.last)
			if b, ok := p.batches[s.base]; !ok || b.ProducerID() != s.pid {
				a = false // the data itself is gone
			}
			all, none = all && a, none && n
		}
		if !seen {
			continue
		}
		want := t.outcome
		if want == "" {
			switch {
			case t.end == "commit" && t.done:
				want = "commit"
			case t.end == "commit":
				want = "either"
			default:
				want = "abort"
			}
		}
		bad := ""
		switch {
		case want == "commit" && !all:
			bad = "committed but not all visible"
		case want == "abort" && !none:
			bad = "not committed but visible"
		case want == "either" && !all && !none:
			bad = "commit in doubt and partly visible"
		}
		if bad != "" {
			l.Counts.Atomicity++
			if always {
				end := t.end
				if end == "" {
					end = "none"
				}
				l.fail("transaction %s/%s (producer %d epoch %d, end asked: %s, acknowledged: %v): %s",
					t.id, t.no, t.sends[0].pid, t.sends[0].epoch, end, t.done, bad)
			}
			t.outcome = "broken"
			continue
		}
		if t.outcome == "" {
			t.outcome = map[bool]string{true: "commit", false: "abort"}[all]
		}
	}
	// Offsets committed in a transaction count only if it committed.
	for k, v := range offsets {
		if t := offsetOwner[k+"@"+strconv.FormatInt(v, 10)]; t != nil && t.outcome == "abort" {
			l.Counts.Atomicity++
			if always {
				l.fail("group offset %s=%d from transaction %s/%s, which did not commit", k, v, t.id, t.no)
			}
		}
	}
	// The last committed transaction's offsets must be there (or later).
	last := map[string]int64{}
	for _, t := range l.txnOrder {
		if t.outcome != "commit" || !t.done {
			continue
		}
		for _, o := range t.offsets {
			k := o.group + "/" + o.tp.topic + "/" + strconv.Itoa(o.tp.part)
			last[k] = max(last[k], o.value)
		}
	}
	for k, v := range last {
		if got, ok := offsets[k]; !ok || got < v {
			l.Counts.CommitsLost++
			if always {
				l.fail("group offset %s is %d, below %d committed in a transaction", k, got, v)
			}
		}
	}
}

func (l *Ledger) checkCommits(offsets map[string]int64) {
	for k, v := range l.committed {
		got, ok := offsets[k]
		if !ok || got < v {
			l.Counts.CommitsLost++
			if l.Policy.Kind == partition.SyncAlways {
				l.fail("group offset %s is %d (present %v), below the acknowledged %d", k, got, ok, v)
			}
			delete(l.committed, k)
		}
	}
}

// checkKeys compares the compacted topic's newest value of each key with
// the acknowledged ones: a cleaning (or a crash in one) must never bring
// back an older value or lose the newest.
func (l *Ledger) checkKeys(found map[string]int64) {
	for k, acked := range l.kvAcked {
		got, ok := found[k]
		if !ok || got < acked || got > l.kvSent[k] {
			l.Counts.KeysLost++
			if l.Policy.Kind == partition.SyncAlways {
				l.fail("compacted topic: key %s's newest value is %d (present %v), acknowledged %d, sent up to %d", k, got, ok, acked, l.kvSent[k])
			}
			// The next stage starts from what survived.
			l.kvAcked[k] = got
		}
	}
}

// WriteRetries writes Retries to path, one line each; no batch in flight
// leaves the file empty (not a blank line, which is no batch).
func (l *Ledger) WriteRetries(path string) error {
	var b strings.Builder
	for _, r := range l.Retries() {
		b.WriteString(r)
		b.WriteByte('\n')
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
