package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/index"
	"github.com/idemlog/idemlog/partition"
	"github.com/idemlog/idemlog/segment"
)

// Each test here closes a data dir cleanly, damages one file as a disk, a
// careless operator or a bad restore would, and opens it again. The rules:
// no acknowledged record is lost or moved without a WARN saying so, no
// offset or producer id is handed out twice, and an intact segment is never
// deleted because another one is damaged.

// logLines is an slog destination that tests read back.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// warned reports whether a WARN line holds every one of parts.
func (l *logLines) warned(parts ...string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for line := range strings.SplitSeq(l.buf.String(), "\n") {
		if !strings.Contains(line, "level=WARN") {
			continue
		}
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// damageOptions are small segments with an index entry per batch, and a
// logger the test reads.
func damageOptions(segmentBytes int64) (Options, *logLines) {
	lines := &logLines{}
	return Options{
		Logger: slog.New(slog.NewTextHandler(lines, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Partition: partition.Options{Segment: segment.Options{
			MaxBytes: segmentBytes, IndexIntervalBytes: 1, IndexMaxBytes: 64 << 10,
		}},
	}, lines
}

// produceValues appends n idempotent batches of one record each, the
// record's value being its batch number, and returns their offsets.
func produceValues(t *testing.T, e *Engine, p *Partition, n int) []int64 {
	t.Helper()
	pr, err := e.NewProducer()
	if err != nil {
		t.Fatal(err)
	}
	bld := batch.NewBuilder(batch.CodecNone)
	var offsets []int64
	for i := range n {
		bld.Reset(batch.CodecNone)
		bld.Append(time.Now().UnixMilli(), nil, valueOf(i), nil)
		res, err := pr.Send(p, bld)
		if err != nil {
			t.Fatal(err)
		}
		offsets = append(offsets, res.BaseOffset)
	}
	return offsets
}

func valueOf(i int) []byte { return []byte("value-" + strconv.Itoa(i)) }

// valuesAt reads the partition from offset to its high watermark and
// returns the value of each record by its offset.
func valuesAt(t *testing.T, p *Partition, from int64) map[int64][]byte {
	t.Helper()
	out := map[int64][]byte{}
	var d batch.Decoder
	for off := from; off < p.log.HighWatermark(); {
		c, err := p.log.Read(off, 1<<20)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		batches := batch.NewIter(c.Data)
		for batches.Next() {
			it, err := d.Records(batches.Batch())
			if err != nil {
				t.Fatal(err)
			}
			var r batch.Record
			for it.Next(&r) {
				out[r.Offset] = bytes.Clone(r.Value)
			}
		}
		if err := batches.Err(); err != nil {
			t.Fatal(err)
		}
		if c.NextOffset <= off {
			t.Fatalf("read at %d made no progress", off)
		}
		off = c.NextOffset
		c.Release()
	}
	return out
}

func segmentFiles(t *testing.T, dir, suffix string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*"+suffix))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	return names
}

// D1. The last segment cut inside a batch whose position its offset index
// names: the open must not trust the index (the tail walk started past the
// data, and the next offset fell back to the segment's base, so a new
// produce was acknowledged at an offset that still held an old record).
// The cut batch is lost and said so, the records before it keep their
// offsets, and the next produce gets an offset no record had.
func TestDamagedLastSegmentCutInsideBatch(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts, lines := damageOptions(1 << 20)
	e := openEngine(t, dir, opts)
	if err := e.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	p := mustPartition(t, e, "t", 0)
	offsets := produceValues(t, e, p, 40)
	before := valuesAt(t, p, 0)
	end := p.log.HighWatermark()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	logs := segmentFiles(t, filepath.Join(dir, "t-0"), ".log")
	st, err := os.Stat(logs[len(logs)-1])
	if err != nil {
		t.Fatal(err)
	}
	// Ten bytes into the last batch's header: the index names its start.
	batchLen := st.Size() / int64(len(offsets))
	cutAt := st.Size() - batchLen + 10
	if err := os.Truncate(logs[len(logs)-1], cutAt); err != nil {
		t.Fatal(err)
	}

	e = openEngine(t, dir, opts)
	p = mustPartition(t, e, "t", 0)
	// A partition closed cleanly opens its segments at first use (it is
	// dormant until then): the read finds the damage.
	after := valuesAt(t, p, 0)
	if !lines.warned(filepath.Base(logs[len(logs)-1])) {
		t.Errorf("no WARN names the cut segment; log:\n%s", lines)
	}
	for off, v := range after {
		if !bytes.Equal(before[off], v) {
			t.Fatalf("offset %d holds %q after the open, %q before", off, v, before[off])
		}
	}
	if len(after) != len(before)-1 {
		t.Errorf("%d records readable, want the %d before the cut batch", len(after), len(before)-1)
	}
	pr, err := e.NewProducer()
	if err != nil {
		t.Fatal(err)
	}
	bld := batch.NewBuilder(batch.CodecNone)
	bld.Append(time.Now().UnixMilli(), nil, []byte("new"), nil)
	res, err := pr.Send(p, bld)
	if err != nil {
		t.Fatal(err)
	}
	if res.BaseOffset < end {
		t.Fatalf("new record acknowledged at offset %d, below the %d given out before the damage", res.BaseOffset, end)
	}
	if got := valuesAt(t, p, res.BaseOffset)[res.BaseOffset]; string(got) != "new" {
		t.Fatalf("offset %d reads %q, want the new record", res.BaseOffset, got)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("close after the repair: %v", err)
	}
	e = openEngine(t, dir, opts)
	defer e.Close()
	p = mustPartition(t, e, "t", 0)
	if got := valuesAt(t, p, res.BaseOffset)[res.BaseOffset]; string(got) != "new" {
		t.Fatalf("after a restart offset %d reads %q, want the acknowledged new record", res.BaseOffset, got)
	}
}

// D2. A log-start-offset-checkpoint that says the log starts past its end
// (a cleanly closed log of 5,000 records): trusted, it deleted every
// segment and restarted the log at that offset. Nothing vouches for such a
// value: every record stays, and a WARN names the file.
func TestDamagedLogStartCheckpointPastLogEnd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts, lines := damageOptions(64 << 10)
	e := openEngine(t, dir, opts)
	if err := e.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	p := mustPartition(t, e, "t", 0)
	produceValues(t, e, p, 5000)
	before := valuesAt(t, p, 0)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	for _, content := range []string{"0\n1\nt 0 1000000\n", "1\n1\nt 0 1000000\n00000000\n"} {
		if err := os.WriteFile(filepath.Join(dir, "t-0", "log-start-offset-checkpoint"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		e = openEngine(t, dir, opts)
		p = mustPartition(t, e, "t", 0)
		if start, hw := p.log.LogStartOffset(), p.log.HighWatermark(); start != 0 || hw != 5000 {
			t.Fatalf("checkpoint %q: log %d..%d after the open, want 0..5000", content, start, hw)
		}
		if after := valuesAt(t, p, 0); len(after) != len(before) {
			t.Fatalf("checkpoint %q: %d records readable, want %d", content, len(after), len(before))
		}
		if !lines.warned("log-start-offset-checkpoint") {
			t.Errorf("checkpoint %q: no WARN names log-start-offset-checkpoint; log:\n%s", content, lines)
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// D3. An older segment zeroed or emptied: the open took it for a torn
// tail, deleted every later (intact) segment and restarted offsets there,
// and a group's committed offset then pointed into new data. The later
// segments must stay, the lost offsets stay unused, and a WARN names the
// damaged file and the offsets lost.
func TestDamagedOlderSegmentKeepsLaterSegments(t *testing.T) {
	t.Parallel()
	for _, damage := range []string{"zeroed", "emptied"} {
		t.Run(damage, func(t *testing.T) {
			dir := t.TempDir()
			opts, lines := damageOptions(8 << 10)
			e := openEngine(t, dir, opts)
			if err := e.CreateTopic("t", 1); err != nil {
				t.Fatal(err)
			}
			p := mustPartition(t, e, "t", 0)
			produceValues(t, e, p, 1000)
			before := valuesAt(t, p, 0)
			end := p.log.HighWatermark()
			tp := TopicPartition{Topic: "t", Partition: 0}
			if err := e.Frontend().CommitOffsets("g", map[TopicPartition]OffsetAndMetadata{tp: {Offset: end}}); err != nil {
				t.Fatal(err)
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			pdir := filepath.Join(dir, "t-0")
			logs := segmentFiles(t, pdir, ".log")
			if len(logs) < 4 {
				t.Fatalf("%d segments, want at least 4", len(logs))
			}
			victim := logs[1]
			base, _ := segment.ParseName(filepath.Base(victim), ".log")
			next, _ := segment.ParseName(filepath.Base(logs[2]), ".log")
			st, err := os.Stat(victim)
			if err != nil {
				t.Fatal(err)
			}
			content := []byte{}
			if damage == "zeroed" {
				content = make([]byte, st.Size())
			}
			if err := os.WriteFile(victim, content, 0o644); err != nil {
				t.Fatal(err)
			}

			e = openEngine(t, dir, opts)
			defer e.Close()
			p = mustPartition(t, e, "t", 0)
			if hw := p.log.HighWatermark(); hw != end {
				t.Fatalf("high watermark %d after the open, want %d", hw, end)
			}
			after := valuesAt(t, p, 0)
			for off, v := range before {
				lost := off >= base && off < next
				if got, ok := after[off]; lost && ok || !lost && !bytes.Equal(got, v) {
					t.Fatalf("offset %d: %q after the open, %q before (damaged segment holds %d..%d)", off, got, v, base, next)
				}
			}
			if !lines.warned(filepath.Base(victim)) {
				t.Errorf("no WARN names %s; log:\n%s", filepath.Base(victim), lines)
			}
			got, err := e.fetchOffsets("g", []TopicPartition{tp}, false)
			if err != nil || got[tp].Offset != end {
				t.Fatalf("committed offset %v, %v; want %d", got, err, end)
			}
			r, err := p.Append(valueBatch(t, -1, 0, false, 'n'))
			if err != nil || r.BaseOffset != end {
				t.Fatalf("new batch at %d (%v), want %d: the group's committed offset must reach it", r.BaseOffset, err, end)
			}
		})
	}
}

// D4. One damaged byte in a __consumer_offsets record: a clean open does not
// scan, so the replay met the batch and took its garbage for a commit (an
// offset changed, or dropped so that it read as -1). The batch's checksum
// tells; the group keeps its previous commit, and a WARN says so.
func TestDamagedConsumerOffsetsRecord(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts, lines := damageOptions(1 << 20)
	e := openEngine(t, dir, opts)
	if err := e.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	tp := TopicPartition{Topic: "t", Partition: 0}
	for _, off := range []int64{10, 42} {
		if err := e.Frontend().CommitOffsets("g", map[TopicPartition]OffsetAndMetadata{tp: {Offset: off}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	pdir := filepath.Join(dir, ConsumerOffsetsTopic+"-"+strconv.Itoa(groupPartition("g")))
	logs := segmentFiles(t, pdir, ".log")
	data, err := os.ReadFile(logs[0])
	if err != nil {
		t.Fatal(err)
	}
	// The second commit's offset, 42, is the last 8-byte big-endian 42 in
	// the file: one bit of it flipped.
	var want [8]byte
	binary.BigEndian.PutUint64(want[:], 42)
	at := bytes.LastIndex(data, want[:])
	if at < 0 {
		t.Fatal("commit of 42 not found in the segment")
	}
	data[at+7] ^= 0x40
	if err := os.WriteFile(logs[0], data, 0o644); err != nil {
		t.Fatal(err)
	}

	e = openEngine(t, dir, opts)
	defer e.Close()
	got, err := e.fetchOffsets("g", []TopicPartition{tp}, false)
	if err != nil {
		t.Fatal(err)
	}
	if got[tp].Offset != 10 {
		t.Errorf("committed offset %d after the damage, want 10 (the intact earlier commit)", got[tp].Offset)
	}
	if !lines.warned("checksum", filepath.Base(pdir)) {
		t.Errorf("no WARN about the damaged commit; log:\n%s", lines)
	}
}

// D5. A deleted .txnindex: taken for a segment without aborted
// transactions, read_committed consumers saw aborted records. The open
// rebuilds it from the segment's markers and logs it.
func TestDeletedTxnIndexRebuilt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts, lines := damageOptions(700)
	opts.Partition.Segment.IndexIntervalBytes = 0
	e := openEngine(t, dir, opts)
	if err := e.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	p := mustPartition(t, e, "t", 0)
	txnIndexFill(t, p)
	want := string(readCommittedValues(t, p))
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	var victim string
	for _, f := range segmentFiles(t, filepath.Join(dir, "t-0"), ".txnindex") {
		if st, err := os.Stat(f); err == nil && st.Size() > 0 {
			victim = f
			break
		}
	}
	if victim == "" {
		t.Fatal("no segment with an aborted transaction")
	}
	if err := os.Remove(victim); err != nil {
		t.Fatal(err)
	}

	e = openEngine(t, dir, opts)
	p = mustPartition(t, e, "t", 0)
	if got := string(readCommittedValues(t, p)); got != want {
		t.Fatalf("read_committed sees %q after the .txnindex was deleted, want %q", got, want)
	}
	if !lines.warned(filepath.Base(victim)) {
		t.Errorf("no WARN names %s; log:\n%s", filepath.Base(victim), lines)
	}
	// Rebuilt on disk, not only in memory: the next clean open trusts it.
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(victim); err != nil || st.Size() == 0 {
		t.Fatalf("%s not rebuilt: %v", victim, err)
	}
	e = openEngine(t, dir, opts)
	defer e.Close()
	if got := string(readCommittedValues(t, mustPartition(t, e, "t", 0))); got != want {
		t.Fatalf("read_committed sees %q after a second open, want %q", got, want)
	}
}

// D6. A lost producer-id-block while the partitions survive: the next id
// was derived as one past the highest id a partition held (4), so ids
// handed out before but never written with (5, 6, ... up to the block's
// end) came back. The next id must be past the block holding every id
// found, and the derivation logged.
func TestLostPIDWatermarkDerivedAboveItsBlock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts, lines := damageOptions(1 << 20)
	e := openEngine(t, dir, opts)
	if err := e.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	p := mustPartition(t, e, "t", 0)
	var handedOut []int64
	for range 10 {
		pid, _, err := e.initProducerID()
		if err != nil {
			t.Fatal(err)
		}
		handedOut = append(handedOut, pid)
	}
	if _, err := p.Append(idem(t, handedOut[3], 0, 0, 1, time.Now().UnixMilli())); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, pidFile)); err != nil {
		t.Fatal(err)
	}

	e = openEngine(t, dir, opts)
	defer e.Close()
	pid, _, err := e.initProducerID()
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(handedOut, pid) || pid < pidBlockSize {
		t.Fatalf("producer id %d after the watermark was lost: ids %v were handed out from the block below %d", pid, handedOut, pidBlockSize)
	}
	if !lines.warned(pidFile) {
		t.Errorf("no WARN names %s; log:\n%s", pidFile, lines)
	}
}

// Recovery that loses nothing is logged too: a rebuilt index, a removed
// leftover file, a corrupt producer snapshot set aside (WARN: producer state
// comes from an older one and the log).
func TestRecoveryActionsLogged(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts, lines := damageOptions(1 << 20)
	e := openEngine(t, dir, opts)
	if err := e.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	produceValues(t, e, mustPartition(t, e, "t", 0), 20)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	idx := segmentFiles(t, filepath.Join(dir, "t-0"), ".index")[0]
	if err := os.WriteFile(idx, bytes.Repeat([]byte{0xff}, index.OffsetEntrySize*3), 0o644); err != nil {
		t.Fatal(err)
	}
	stray := filepath.Join(dir, "t-0", segment.FileName(0, ".log")+".deleted")
	if err := os.WriteFile(stray, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	snaps := segmentFiles(t, filepath.Join(dir, "t-0"), ".snapshot")
	if len(snaps) == 0 {
		t.Fatal("no producer snapshot after a clean close")
	}
	snap := snaps[len(snaps)-1]
	data, err := os.ReadFile(snap)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 1
	if err := os.WriteFile(snap, data, 0o644); err != nil {
		t.Fatal(err)
	}
	e = openEngine(t, dir, opts)
	defer e.Close()
	if hw := mustPartition(t, e, "t", 0).log.HighWatermark(); hw != 20 {
		t.Fatalf("high watermark %d, want 20", hw)
	}
	out := lines.String()
	for _, want := range []string{filepath.Base(stray), filepath.Base(strings.TrimSuffix(idx, ".index") + ".log")} {
		if !strings.Contains(out, want) {
			t.Errorf("no log line names %s; log:\n%s", want, out)
		}
	}
	if !lines.warned("corrupt producer snapshot", filepath.Base(snap)) {
		t.Errorf("no WARN names the corrupt snapshot %s; log:\n%s", filepath.Base(snap), out)
	}
}

// topic.config decides what retention deletes: a changed byte or a lost
// file must not put the engine's defaults (7 days) in place of the topic's
// own retention.ms=-1. A damaged or missing file refuses the open, naming
// the file and the way out; a file written before the checksum (no header)
// is read as before, and a partition that predates the rule gets an empty
// one.
func TestDamagedTopicConfig(t *testing.T) {
	t.Parallel()
	setup := func(t *testing.T) (string, string) {
		dir := t.TempDir()
		e := openEngine(t, dir, Options{})
		if err := e.CreateTopic("t", 1, map[string]string{"retention.ms": "-1"}); err != nil {
			t.Fatal(err)
		}
		if err := e.CreateTopic("plain", 1); err != nil {
			t.Fatal(err)
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		return dir, filepath.Join(dir, "t-0", topicConfigFile)
	}
	refused := func(t *testing.T, dir, path, why string) {
		t.Helper()
		e, err := Open(dir, Options{})
		if err == nil {
			e.Close()
			t.Fatalf("%s: Open succeeded", why)
		}
		if !errors.Is(err, ErrCorruptMetadata) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "write them again") {
			t.Fatalf("%s: Open: %v; want ErrCorruptMetadata naming %s and the way out", why, err, path)
		}
	}
	t.Run("byte changed", func(t *testing.T) {
		dir, path := setup(t)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, bytes.Replace(data, []byte("=-1"), []byte("=71"), 1), 0o644); err != nil {
			t.Fatal(err)
		}
		refused(t, dir, path, "retention.ms=-1 changed to 71")
	})
	t.Run("deleted", func(t *testing.T) {
		dir, path := setup(t)
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		refused(t, dir, path, "topic.config deleted")
		// The way out the message gives: the overrides written again.
		if err := os.WriteFile(path, []byte("retention.ms=-1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		e := openEngine(t, dir, Options{})
		defer e.Close()
		if got := mustPartition(t, e, "t", 0).settings.Load().config["retention.ms"]; got != "-1" {
			t.Fatalf("retention.ms %q after the file was written again, want -1", got)
		}
	})
	t.Run("partition from before the rule", func(t *testing.T) {
		dir, _ := setup(t)
		plain := filepath.Join(dir, "plain-0")
		if err := os.Remove(filepath.Join(plain, topicConfigFile)); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(plain, "recovery-point-offset-checkpoint"), []byte("0\n1\nplain 0 0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		e := openEngine(t, dir, Options{})
		defer e.Close()
		if _, err := os.Stat(filepath.Join(plain, topicConfigFile)); err != nil {
			t.Fatalf("no topic.config written for the older partition: %v", err)
		}
	})
}
