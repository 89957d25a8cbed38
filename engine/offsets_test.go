package engine

import (
	"errors"
	"sync"
	"testing"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/errcode"
	"github.com/idemlog/idemlog/producer"
)

func TestOffsetsGroupPartition(t *testing.T) {
	t.Parallel()
	// Expected values: Java's String.hashCode in int32 arithmetic, then
	// Kafka's Utils.abs (MIN_VALUE -> 0) mod 8.
	cases := []struct {
		group string
		hash  int32
		part  int
	}{
		{"", 0, 0},
		{"a", 97, 1},
		{"Aa", 2112, 0},
		{"BB", 2112, 0},
		{"hello", 99162322, 2},
		{"group-1", 293427299, 3},
		{"my-consumer-group", 1513705513, 1},
		{"spark-kafka-source", -877681262, 6},
		{"polygenelubricants", -2147483648, 0},
		{"é", 233, 1},
		{"😀", 1772899, 3}, // a surrogate pair in UTF-16
	}
	for _, c := range cases {
		if h := javaStringHashCode(c.group); h != c.hash {
			t.Errorf("hashCode(%q) = %d, want %d", c.group, h, c.hash)
		}
		if p := groupPartition(c.group); p != c.part {
			t.Errorf("groupPartition(%q) = %d, want %d", c.group, p, c.part)
		}
	}
}

func offsetsPart(t *testing.T, e *Engine, group string) *Partition {
	t.Helper()
	p, err := e.Partition(ConsumerOffsetsTopic, groupPartition(group))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func wantOffsets(t *testing.T, e *Engine, group string, stable bool, want map[TopicPartition]OffsetAndMetadata) {
	t.Helper()
	var tps []TopicPartition
	for tp := range want {
		tps = append(tps, tp)
	}
	got, err := e.fetchOffsets(group, tps, stable)
	if err != nil {
		t.Fatalf("fetch %q: %v", group, err)
	}
	if len(got) != len(want) {
		t.Fatalf("fetch %q: %v, want %v", group, got, want)
	}
	for tp, w := range want {
		if got[tp] != w {
			t.Fatalf("fetch %q %v: %+v, want %+v", group, tp, got[tp], w)
		}
	}
}

func TestOffsetsCommitFetch(t *testing.T) {
	t.Parallel()
	e := openEngine(t, t.TempDir(), Options{})
	defer e.Close()
	t0, t1 := TopicPartition{"orders", 0}, TopicPartition{"orders", 1}
	missing := TopicPartition{"other", 3}
	if err := e.Frontend().CommitOffsets("g", map[TopicPartition]OffsetAndMetadata{t0: {10, "m0"}, t1: {20, ""}}); err != nil {
		t.Fatal(err)
	}
	wantOffsets(t, e, "g", true, map[TopicPartition]OffsetAndMetadata{t0: {10, "m0"}, t1: {20, ""}, missing: {-1, ""}})
	// Overwrite one partition.
	if err := e.Frontend().CommitOffsets("g", map[TopicPartition]OffsetAndMetadata{t0: {15, "m1"}}); err != nil {
		t.Fatal(err)
	}
	wantOffsets(t, e, "g", false, map[TopicPartition]OffsetAndMetadata{t0: {15, "m1"}, t1: {20, ""}})
	// Another group is separate; nil tps lists all of a group's offsets.
	wantOffsets(t, e, "h", false, map[TopicPartition]OffsetAndMetadata{t0: {-1, ""}})
	all, err := e.fetchOffsets("g", nil, true)
	if err != nil || len(all) != 2 || all[t0].Offset != 15 {
		t.Fatalf("all offsets: %v %v", all, err)
	}
	// The records are in the group's partition, in Kafka's layouts.
	p := offsetsPart(t, e, "g")
	c, err := p.log.Read(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	b := batch.Batch(c.Data)
	if b.ProducerID() != -1 || b.IsTransactional() || b.RecordsCount() != 2 {
		t.Fatalf("batch pid %d txn %v records %d", b.ProducerID(), b.IsTransactional(), b.RecordsCount())
	}
	var dec batch.Decoder
	recs, err := dec.Records(b)
	if err != nil {
		t.Fatal(err)
	}
	var r batch.Record
	if !recs.Next(&r) {
		t.Fatal(recs.Err())
	}
	wantKey := []byte{0, 1, 0, 1, 'g', 0, 6, 'o', 'r', 'd', 'e', 'r', 's', 0, 0, 0, 0}
	if string(r.Key) != string(wantKey) {
		t.Fatalf("key %x, want %x", r.Key, wantKey)
	}
	wantVal := []byte{0, 3, 0, 0, 0, 0, 0, 0, 0, 10, 0xff, 0xff, 0xff, 0xff, 0, 2, 'm', '0'}
	if len(r.Value) != len(wantVal)+8 || string(r.Value[:len(wantVal)]) != string(wantVal) {
		t.Fatalf("value %x, want %x + timestamp", r.Value, wantVal)
	}
	// Bad input.
	if err := e.Frontend().CommitOffsets("", map[TopicPartition]OffsetAndMetadata{t0: {1, ""}}); !errors.Is(err, ErrInvalidGroupID) || errcode.Code(err) != 24 {
		t.Fatalf("empty group: %v", err)
	}
	if err := e.Frontend().TxnCommitOffsets("g", -1, 0, map[TopicPartition]OffsetAndMetadata{t0: {1, ""}}); !errors.Is(err, ErrInvalidOffsetCommit) {
		t.Fatalf("pid -1: %v", err)
	}
	if err := e.Frontend().CommitOffsets("g", nil); err != nil {
		t.Fatalf("no offsets: %v", err)
	}
}

func TestOffsetsTransactional(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	const group = "group-1"
	tp := TopicPartition{"orders", 0}
	tps := []TopicPartition{tp}
	if err := e.Frontend().CommitOffsets(group, map[TopicPartition]OffsetAndMetadata{tp: {5, "plain"}}); err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := e.initProducerID()
	if err != nil {
		t.Fatal(err)
	}
	commitTxn := func(off int64) {
		t.Helper()
		if err := e.Frontend().TxnCommitOffsets(group, pid, epoch, map[TopicPartition]OffsetAndMetadata{tp: {off, "txn"}}); err != nil {
			t.Fatal(err)
		}
	}
	unstable := func() {
		t.Helper()
		_, err := e.fetchOffsets(group, tps, true)
		if !errors.Is(err, ErrUnstableOffsetCommit) || errcode.Code(err) != 88 {
			t.Fatalf("requireStable with a pending commit: %v", err)
		}
	}
	// Two commits in one transaction: sequences 0 then 1.
	commitTxn(8)
	commitTxn(9)
	wantOffsets(t, e, group, false, map[TopicPartition]OffsetAndMetadata{tp: {5, "plain"}})
	unstable()
	// Another partition of the group, and another group, are stable.
	wantOffsets(t, e, group, true, map[TopicPartition]OffsetAndMetadata{{"orders", 1}: {-1, ""}})
	wantOffsets(t, e, "a", true, map[TopicPartition]OffsetAndMetadata{tp: {-1, ""}})
	p := offsetsPart(t, e, group)
	if _, err := p.writeMarkerDurable(producer.Marker{ProducerID: pid, Epoch: epoch, Commit: true}); err != nil {
		t.Fatal(err)
	}
	wantOffsets(t, e, group, true, map[TopicPartition]OffsetAndMetadata{tp: {9, "txn"}})

	// An aborted transaction leaves the committed offset.
	commitTxn(12)
	unstable()
	if _, err := p.writeMarkerDurable(producer.Marker{ProducerID: pid, Epoch: epoch}); err != nil {
		t.Fatal(err)
	}
	wantOffsets(t, e, group, true, map[TopicPartition]OffsetAndMetadata{tp: {9, "txn"}})

	// A plain commit written after a transactional one wins when the
	// transaction commits (the later record is current).
	commitTxn(13)
	if err := e.Frontend().CommitOffsets(group, map[TopicPartition]OffsetAndMetadata{tp: {14, "later"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.writeMarkerDurable(producer.Marker{ProducerID: pid, Epoch: epoch, Commit: true}); err != nil {
		t.Fatal(err)
	}
	wantOffsets(t, e, group, true, map[TopicPartition]OffsetAndMetadata{tp: {14, "later"}})

	// A bumped epoch fences the old one.
	if _, err := p.writeMarkerDurable(producer.Marker{ProducerID: pid, Epoch: epoch + 1}); err != nil {
		t.Fatal(err)
	}
	if err := e.Frontend().TxnCommitOffsets(group, pid, epoch, map[TopicPartition]OffsetAndMetadata{tp: {99, ""}}); !errors.Is(err, producer.ErrInvalidProducerEpoch) {
		t.Fatalf("fenced epoch: %v", err)
	}
	epoch++

	// Left pending across restarts: a clean close, then a crash.
	commitTxn(20)
	pid2, epoch2, _ := e.initProducerID()
	tp2 := TopicPartition{"payments", 2}
	if err := e.Frontend().TxnCommitOffsets(group, pid2, epoch2, map[TopicPartition]OffsetAndMetadata{tp2: {30, "p2"}}); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.fetchOffsets(group, tps, false); !errors.Is(err, ErrClosed) {
		t.Fatalf("fetch after close: %v", err)
	}
	e = openEngine(t, dir, Options{})
	wantOffsets(t, e, group, false, map[TopicPartition]OffsetAndMetadata{tp: {14, "later"}, tp2: {-1, ""}})
	unstable()
	p = offsetsPart(t, e, group)
	if _, err := p.writeMarkerDurable(producer.Marker{ProducerID: pid2, Epoch: epoch2, Commit: true}); err != nil {
		t.Fatal(err)
	}
	wantOffsets(t, e, group, false, map[TopicPartition]OffsetAndMetadata{tp2: {30, "p2"}})
	unstable() // pid still pending on tp
	e.kill()

	e = openEngine(t, dir, Options{})
	defer e.Close()
	wantOffsets(t, e, group, false, map[TopicPartition]OffsetAndMetadata{tp: {14, "later"}, tp2: {30, "p2"}})
	unstable()
	// The producer's sequence continues after the restart.
	commitTxn(21)
	p = offsetsPart(t, e, group)
	if _, err := p.writeMarkerDurable(producer.Marker{ProducerID: pid, Epoch: epoch, Commit: true}); err != nil {
		t.Fatal(err)
	}
	wantOffsets(t, e, group, true, map[TopicPartition]OffsetAndMetadata{tp: {21, "txn"}, tp2: {30, "p2"}})
	// Aborted transactions stay dropped after a replay.
	e.kill()
	e = openEngine(t, dir, Options{})
	wantOffsets(t, e, group, true, map[TopicPartition]OffsetAndMetadata{tp: {21, "txn"}, tp2: {30, "p2"}})
}

// A marker written between a transactional commit's write and its
// registration ends the commit's transaction.
func TestOffsetsMarkerBeforeRegistration(t *testing.T) {
	t.Parallel()
	e := openEngine(t, t.TempDir(), Options{})
	defer e.Close()
	tp := TopicPartition{"t", 0}
	commit := true
	e.opts.private.offsetsAppendedHook = func(p *Partition, pid int64, epoch int16) {
		if _, err := p.writeMarkerDurable(producer.Marker{ProducerID: pid, Epoch: epoch, Commit: commit}); err != nil {
			t.Error(err)
		}
	}
	pid, epoch, _ := e.initProducerID()
	if err := e.Frontend().TxnCommitOffsets("g", pid, epoch, map[TopicPartition]OffsetAndMetadata{tp: {7, ""}}); err != nil {
		t.Fatal(err)
	}
	wantOffsets(t, e, "g", true, map[TopicPartition]OffsetAndMetadata{tp: {7, ""}})
	commit = false
	if err := e.Frontend().TxnCommitOffsets("g", pid, epoch, map[TopicPartition]OffsetAndMetadata{tp: {8, ""}}); err != nil {
		t.Fatal(err)
	}
	wantOffsets(t, e, "g", true, map[TopicPartition]OffsetAndMetadata{tp: {7, ""}})
}

// Commits racing markers of the same producer: whatever the interleaving,
// the live state is the one a replay of the log rebuilds.
func TestOffsetsConcurrentMarkers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	const group = "g"
	if _, err := e.fetchOffsets(group, nil, false); err != nil { // opens the store
		t.Fatal(err)
	}
	p := offsetsPart(t, e, group)
	var wg sync.WaitGroup
	for w := range 4 {
		pid, epoch, _ := e.initProducerID()
		tp := TopicPartition{"t", int32(w)}
		wg.Go(func() {
			for i := range 50 {
				var inner sync.WaitGroup
				inner.Go(func() {
					if err := e.Frontend().TxnCommitOffsets(group, pid, epoch, map[TopicPartition]OffsetAndMetadata{tp: {int64(i), ""}}); err != nil {
						t.Error(err)
					}
				})
				inner.Go(func() {
					if _, err := p.writeMarkerDurable(producer.Marker{ProducerID: pid, Epoch: epoch, Commit: i%3 != 0}); err != nil {
						t.Error(err)
					}
				})
				_, _ = e.fetchOffsets(group, []TopicPartition{tp}, true)
				inner.Wait()
			}
		})
	}
	wg.Wait()
	if len(storeOf(e).parts[groupPartition(group)].committed[group]) == 0 {
		t.Error("nothing committed")
	}
	liveIsReplayed(t, e, dir, group)
}

func storeOf(e *Engine) *offsetStore {
	e.offsetsMu.Lock()
	defer e.offsetsMu.Unlock()
	return e.offsetStore
}

// A pending transactional commit, then a later plain commit of the same
// partition (current: later in the log), then a deletion whose tombstone is
// written before the transaction's COMMIT marker. In log order the
// tombstone deletes the plain offset and the COMMIT marker then installs the
// transactional one (nothing current to be older than), which is what a
// replay rebuilds. Live, the marker runs between the tombstone's write and
// its registration: it compares against the plain offset the tombstone is
// about to delete, loses, and the deletion then leaves nothing.
func TestMarkerInTombstoneWindowLostAgainstDeletedOffset(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	const g = "g"
	tp := TopicPartition{"t", 0}
	pid, epoch, err := e.initProducerID()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Frontend().TxnCommitOffsets(g, pid, epoch, map[TopicPartition]OffsetAndMetadata{tp: {7, "txn"}}); err != nil {
		t.Fatal(err)
	}
	if err := e.Frontend().CommitOffsets(g, map[TopicPartition]OffsetAndMetadata{tp: {9, "plain"}}); err != nil {
		t.Fatal(err)
	}
	e.opts.private.offsetsTombstonedHook = func(p *Partition) {
		if _, err := p.writeMarkerDurable(producer.Marker{ProducerID: pid, Epoch: epoch, Commit: true}); err != nil {
			t.Error(err)
		}
	}
	if had, err := e.deleteGroupOffsets(g); err != nil || !had {
		t.Fatalf("delete: %v %v", had, err)
	}
	e.opts.private.offsetsTombstonedHook = nil
	live, err := e.fetchOffsets(g, []TopicPartition{tp}, true)
	if err != nil {
		t.Fatal(err)
	}
	e.kill()
	e = openEngine(t, dir, Options{})
	defer e.Close()
	replayed, err := e.fetchOffsets(g, []TopicPartition{tp}, true)
	if err != nil {
		t.Fatal(err)
	}
	want := OffsetAndMetadata{7, "txn"}
	if replayed[tp] != want {
		t.Fatalf("replayed: %+v, want %+v (log order: txn, plain, tombstone, COMMIT)", replayed[tp], want)
	}
	if live[tp] != replayed[tp] {
		t.Fatalf("live %+v, replayed %+v: the live state is not the log's", live[tp], replayed[tp])
	}
}

// Kafka decodes a group id's bytes with Java's UTF-8 decoder (new
// String(bytes, UTF_8)), which replaces each maximal ill-formed subpart with
// ONE U+FFFD, and hashes that String. Go's range over a string yields one
// U+FFFD per invalid byte, so a group id with a truncated multi-byte
// sequence hashes differently and lands in another partition than Kafka's.
// Expected values printed by OpenJDK 17 (String.hashCode of the decoded
// bytes).
func TestGroupPartitionInvalidUTF8MatchesJava(t *testing.T) {
	t.Parallel()
	cases := []struct {
		group string
		hash  int32 // Java: new String(group bytes, UTF_8).hashCode()
	}{
		{"\xff", 65533},         // fffd
		{"\xc0\x80", 2097056},   // fffd fffd
		{"\xe2\x82", 65533},     // fffd (truncated 3-byte sequence)
		{"\xed\xa0\x80", 65533}, // fffd (encoded surrogate)
		{"\xf0\x9f\x98", 65533}, // fffd (truncated 4-byte sequence)
		{"a\xe2\x82b", 2124838}, // 0061 fffd 0062
	}
	for _, c := range cases {
		if h := javaStringHashCode(c.group); h != c.hash {
			t.Errorf("hashCode(%q) = %d, want %d (Java)", c.group, h, c.hash)
		}
		want := int(c.hash) % ConsumerOffsetsPartitions
		if p := groupPartition(c.group); p != want {
			t.Errorf("groupPartition(%q) = %d, want %d (Kafka)", c.group, p, want)
		}
	}
}
