package engine

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/errcode"
	"github.com/idemlog/idemlog/partition"
	"github.com/idemlog/idemlog/producer"
	"github.com/idemlog/idemlog/segment"
)

func mustPartition(t *testing.T, e *Engine, topic string, index int) *Partition {
	t.Helper()
	p, err := e.Partition(topic, index)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func chanClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Partition.Advanced wakes on appends, and a marker's wakeup comes after
// the last stable offset moved: a read_committed long-poll woken by it sees
// the new LSO.
func TestPartitionAdvancedCoversLSO(t *testing.T) {
	t.Parallel()
	e := openEngine(t, t.TempDir(), Options{})
	defer e.Close()
	if err := e.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	p := mustPartition(t, e, "t", 0)
	ch := p.Advanced()
	if chanClosed(ch) {
		t.Fatal("closed before any append")
	}
	if _, err := p.Append(idem(t, 7, 0, 0, 1, time.Now().UnixMilli())); err != nil {
		t.Fatal(err)
	}
	if !chanClosed(ch) {
		t.Fatal("not woken by an append")
	}
	// A transaction opens at 1: the LSO stays there.
	if _, err := p.Append(txnBatch(t, 1, 0, 0, 2)); err != nil {
		t.Fatal(err)
	}
	if lso := p.LastStableOffset(); lso != 1 {
		t.Fatalf("LSO %d with a transaction open at 1", lso)
	}
	// A read_committed long-poll for the LSO to pass 1.
	woke := make(chan error, 1)
	go func() {
		for {
			ch := p.Advanced()
			if p.LastStableOffset() > 1 {
				woke <- nil
				return
			}
			select {
			case <-ch:
			case <-time.After(10 * time.Second):
				woke <- errors.New("long-poll never saw the LSO move")
				return
			}
		}
	}()
	// The marker's state change is in place before the high watermark
	// moves past the marker; a waiter that takes the channel now is woken
	// by that move.
	var inHook <-chan struct{}
	hook := markerHook(func(pid int64, commit bool, offset int64) {
		if hw := p.log.HighWatermark(); hw > offset {
			t.Errorf("marker at %d visible (high watermark %d) before the open transactions took it", offset, hw)
		}
		if fu := p.txns.firstUnstable.Load(); fu >= 0 {
			t.Errorf("first unstable offset %d after the marker's state change", fu)
		}
		inHook = p.Advanced()
	})
	p.onMarker.Store(&hook)
	r, err := p.writeMarkerDurable(producer.Marker{ProducerID: 1, Epoch: 0, Commit: true})
	if err != nil {
		t.Fatal(err)
	}
	if !chanClosed(inHook) {
		t.Fatal("a channel taken while the marker was applied was not closed when it became visible")
	}
	if lso := p.LastStableOffset(); lso != r.LastOffset+1 {
		t.Fatalf("LSO %d after the commit, want %d", lso, r.LastOffset+1)
	}
	if err := <-woke; err != nil {
		t.Fatal(err)
	}
}

func TestDeleteTopic(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	if err := e.CreateTopic("t", 3); err != nil {
		t.Fatal(err)
	}
	if err := e.CreateTopic("keep", 1); err != nil {
		t.Fatal(err)
	}
	var sent [][]byte
	for i := range 3 {
		b := idem(t, int64(10+i), 0, 0, 3, time.Now().UnixMilli())
		sent = append(sent, b)
		if _, err := mustPartition(t, e, "t", i).Append(b); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := mustPartition(t, e, "keep", 0).Append(idem(t, 1, 0, 0, 1, time.Now().UnixMilli())); err != nil {
		t.Fatal(err)
	}
	oldID, ok := e.topicIDOf("t")
	if !ok {
		t.Fatal("no topic id")
	}
	p0, p1 := mustPartition(t, e, "t", 0), mustPartition(t, e, "t", 1)
	chunk, err := p0.log.Read(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	parked := p1.Advanced()

	if err := e.DeleteTopic("t"); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := e.Partition("t", i); !errors.Is(err, ErrUnknownTopicOrPartition) {
			t.Fatalf("t-%d after delete: %v", i, err)
		}
	}
	if _, ok := e.Topics()["t"]; ok {
		t.Fatal("deleted topic still listed")
	}
	if _, ok := e.topicIDOf("t"); ok {
		t.Fatal("deleted topic still has an id")
	}
	if _, ok := e.topicByID(oldID); ok {
		t.Fatal("deleted topic's id still resolves")
	}
	entries, _ := os.ReadDir(dir)
	for _, ent := range entries {
		if strings.HasPrefix(ent.Name(), "t-") {
			t.Fatalf("%s left in the data dir", ent.Name())
		}
	}
	// Handles taken before the delete fail cleanly.
	if !chanClosed(parked) {
		t.Fatal("reader parked on Advanced not woken by the delete")
	}
	if _, err := p1.Append(idem(t, 11, 0, 3, 1, time.Now().UnixMilli())); !errors.Is(err, ErrUnknownTopicOrPartition) || errcode.Code(err) != errcode.UnknownTopicOrPartition {
		t.Fatalf("append to a deleted partition: %v", err)
	}
	if _, err := p1.Append(idem(t, -1, -1, -1, 1, time.Now().UnixMilli())); !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatalf("plain append to a deleted partition: %v", err)
	}
	if _, err := p1.writeMarkerDurable(producer.Marker{ProducerID: 11, Epoch: 0}); !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatalf("marker to a deleted partition: %v", err)
	}
	if _, _, err := p1.ReadCommitted(0, 1<<20, nil); !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatalf("read_committed of a deleted partition: %v", err)
	}
	if _, err := p1.log.Read(0, 1<<20); !errors.Is(err, partition.ErrClosed) {
		t.Fatalf("read of a deleted partition: %v", err)
	}
	// A chunk read before the delete is intact until released.
	if !bytes.Equal(chunk.Data[8:], sent[0][8:]) {
		t.Fatal("chunk held across the delete changed")
	}
	chunk.Release()
	// Errors for what is not there, or may not go.
	if err := e.DeleteTopic("t"); !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatalf("second delete: %v", err)
	}
	if err := e.DeleteTopic("../x"); !errors.Is(err, ErrInvalidTopic) {
		t.Fatalf("bad name: %v", err)
	}
	if err := e.Frontend().CommitOffsets("g", map[TopicPartition]OffsetAndMetadata{{"keep", 0}: {1, ""}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.coordinator(); err != nil {
		t.Fatal(err)
	}
	for _, internal := range []string{ConsumerOffsetsTopic, txnStateTopic} {
		if _, ok := e.Topics()[internal]; !ok {
			t.Fatalf("%s not created", internal)
		}
		err := e.DeleteTopic(internal)
		if !errors.Is(err, ErrInternalTopic) || errcode.Code(err) != errcode.InvalidRequest {
			t.Fatalf("delete %s: %v", internal, err)
		}
		if _, ok := e.Topics()[internal]; !ok {
			t.Fatalf("%s gone after a refused delete", internal)
		}
	}
	// Recreated: new, empty partitions under a new id.
	if err := e.CreateTopic("t", 2); err != nil {
		t.Fatal(err)
	}
	newID, _ := e.topicIDOf("t")
	if newID == oldID {
		t.Fatal("recreated topic kept its id")
	}
	check := func(e *Engine) {
		t.Helper()
		if n := e.Topics()["t"]; n != 2 {
			t.Fatalf("recreated topic has %d partitions", n)
		}
		for i := range 2 {
			p := mustPartition(t, e, "t", i)
			if l := p.log; l.HighWatermark() != 0 || l.LogStartOffset() != 0 {
				t.Fatalf("recreated t-%d: log %d..%d", i, l.LogStartOffset(), l.HighWatermark())
			}
			if p.Producers() != 0 {
				t.Fatalf("recreated t-%d has %d producers", i, p.Producers())
			}
			if p.TopicID() != newID {
				t.Fatalf("recreated t-%d has another id", i)
			}
		}
		// The old producer is unknown: sequence 0 again is new data.
		if r, err := mustPartition(t, e, "t", 0).Append(idem(t, 10, 0, 0, 3, time.Now().UnixMilli())); err != nil || r.Duplicate || r.BaseOffset != 0 {
			t.Fatalf("append to the recreated topic: %+v %v", r, err)
		}
		if hw := mustPartition(t, e, "keep", 0).log.HighWatermark(); hw != 1 {
			t.Fatalf("other topic: high watermark %d", hw)
		}
	}
	check(e)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.DeleteTopic("keep"); !errors.Is(err, ErrClosed) {
		t.Fatalf("delete after close: %v", err)
	}
	e = openEngine(t, dir, Options{})
	defer e.Close()
	if id, _ := e.topicIDOf("t"); id != newID {
		t.Fatal("recreated topic's id changed on reopen")
	}
	if err := e.DeleteTopic("t"); err != nil {
		t.Fatal(err)
	}
	if err := e.CreateTopic("t", 2); err != nil {
		t.Fatal(err)
	}
	// And again, after a reopen: empty, under yet another id.
	prevID := newID
	newID, _ = e.topicIDOf("t")
	if newID == prevID || newID == oldID {
		t.Fatal("second recreation reused an id")
	}
	check(e)
}

// A crash after a deletion's rename and sync, before the removal: Open
// finishes it. A crash between two partitions' renames leaves the topic
// with its first partitions.
func TestDeleteTopicCrashLeftovers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	for _, topic := range []string{"gone", "half"} {
		if err := e.CreateTopic(topic, 2); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			if _, err := mustPartition(t, e, topic, i).Append(idem(t, 1, 0, 0, 2, time.Now().UnixMilli())); err != nil {
				t.Fatal(err)
			}
		}
	}
	halfID, _ := e.topicIDOf("half")
	e.kill() // as a crash: no clean shutdown either
	rename := func(from, hex string) string {
		to := filepath.Join(dir, from+"."+hex+"-delete")
		if err := os.Rename(filepath.Join(dir, from), to); err != nil {
			t.Fatal(err)
		}
		return to
	}
	leftovers := []string{
		rename("gone-1", "0123456789abcdef0123456789abcdef"),
		rename("gone-0", "fedcba9876543210fedcba9876543210"),
		rename("half-1", "00000000000000000000000000000001"),
	}
	// Lookalikes that are not DeleteTopic's are left alone.
	decoys := []string{"notes-delete", "x-0.zz-delete", "gone-0.0123-delete"}
	for _, d := range decoys {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	e = openEngine(t, dir, Options{})
	defer e.Close()
	for _, l := range leftovers {
		if _, err := os.Stat(l); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s not removed at open: %v", filepath.Base(l), err)
		}
	}
	for _, d := range decoys {
		if _, err := os.Stat(filepath.Join(dir, d)); err != nil {
			t.Fatalf("decoy %s: %v", d, err)
		}
	}
	topics := e.Topics()
	if _, ok := topics["gone"]; ok {
		t.Fatal("a topic whose partitions were all renamed is back")
	}
	if topics["half"] != 1 {
		t.Fatalf("half-deleted topic has %d partitions, want 1", topics["half"])
	}
	if id, _ := e.topicIDOf("half"); id != halfID {
		t.Fatal("half-deleted topic's id changed")
	}
	if hw := mustPartition(t, e, "half", 0).log.HighWatermark(); hw != 2 {
		t.Fatalf("half-0: high watermark %d, want 2", hw)
	}
	if err := e.DeleteTopic("half"); err != nil {
		t.Fatal(err)
	}
	if err := e.CreateTopic("gone", 1); err != nil {
		t.Fatal(err)
	}
	if hw := mustPartition(t, e, "gone", 0).log.HighWatermark(); hw != 0 {
		t.Fatalf("recreated after a crashed delete: high watermark %d", hw)
	}
}

// Appends, reads and parked long-polls racing a DeleteTopic get errors,
// never a crash or a read of freed memory.
func TestDeleteTopicInFlight(t *testing.T) {
	t.Parallel()
	e := openEngine(t, t.TempDir(), Options{Partition: partition.Options{Segment: segment.Options{MaxBytes: 8192}}})
	defer e.Close()
	if err := e.CreateTopic("t", 2); err != nil {
		t.Fatal(err)
	}
	parts := []*Partition{mustPartition(t, e, "t", 0), mustPartition(t, e, "t", 1)}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	expected := func(err error) bool {
		return errors.Is(err, ErrUnknownTopicOrPartition) || errors.Is(err, partition.ErrClosed)
	}
	for _, p := range parts {
		for w := range 2 {
			wg.Add(1)
			go func() { // appender
				defer wg.Done()
				for seq := int32(0); ; seq += 2 {
					if _, err := p.Append(idem(t, int64(100+w), 0, seq, 2, time.Now().UnixMilli())); err != nil {
						if !expected(err) {
							t.Errorf("append: %v", err)
						}
						return
					}
				}
			}()
		}
		wg.Add(1)
		go func() { // reader that holds chunks and checks them
			defer wg.Done()
			var off int64
			for {
				c, err := p.log.Read(off, 4096)
				if err != nil {
					if !expected(err) && !errors.Is(err, partition.ErrOffsetOutOfRange) {
						t.Errorf("read: %v", err)
					}
					return
				}
				for data := c.Data; len(data) > 0; {
					n, err := batch.Size(data)
					if err == nil {
						_, err = batch.Validate(data[:n], 1<<20)
					}
					if err != nil {
						t.Errorf("chunk at %d: %v", off, err)
						c.Release()
						return
					}
					data = data[n:]
				}
				off = c.NextOffset
				c.Release()
			}
		}()
		wg.Add(1)
		go func() { // long-poll waiter
			defer wg.Done()
			for {
				ch := p.Advanced()
				if _, err := p.log.Read(p.log.HighWatermark(), 1); err != nil {
					if !expected(err) {
						t.Errorf("poll: %v", err)
					}
					return
				}
				select {
				case <-ch:
				case <-stop:
					t.Error("long-poll waiter not woken by the delete")
					return
				}
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	if err := e.DeleteTopic("t"); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		close(stop)
		<-done
		t.Fatal("goroutines still running 20s after the delete")
	}
}

func readMetadataFile(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name, partitionMetadataFile))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestTopicIDs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	if err := e.CreateTopic("a", 1); err != nil {
		t.Fatal(err)
	}
	if err := e.CreateTopic("b", 3); err != nil {
		t.Fatal(err)
	}
	a, okA := e.topicIDOf("a")
	b, okB := e.topicIDOf("b")
	if !okA || !okB || a == b || a == ([16]byte{}) || b == ([16]byte{}) {
		t.Fatalf("ids %x %x", a, b)
	}
	if a[6]>>4 != 4 || a[8]>>6 != 2 {
		t.Fatalf("id %x is not a version 4 UUID", a)
	}
	if _, ok := e.topicIDOf("missing"); ok {
		t.Fatal("id for a missing topic")
	}
	if name, ok := e.topicByID(b); !ok || name != "b" {
		t.Fatalf("TopicByID: %q %v", name, ok)
	}
	if _, ok := e.topicByID([16]byte{1}); ok {
		t.Fatal("unknown id resolves")
	}
	// Kafka's partition.metadata, the same in every partition.
	want := "version: 0\ntopic_id: " + topicIDString(b) + "\n"
	for i := range 3 {
		if mustPartition(t, e, "b", i).TopicID() != b {
			t.Fatalf("b-%d has another id", i)
		}
		if got := readMetadataFile(t, dir, partitionKey("b", i)); got != want {
			t.Fatalf("b-%d partition.metadata %q, want %q", i, got, want)
		}
	}
	if len(topicIDString(b)) != 22 {
		t.Fatalf("id text %q", topicIDString(b))
	}
	// Added partitions take the topic's id.
	if err := e.CreateTopic("b", 5); err != nil {
		t.Fatal(err)
	}
	if id, _ := e.topicIDOf("b"); id != b || mustPartition(t, e, "b", 4).TopicID() != b {
		t.Fatal("added partitions got another id")
	}
	if got := readMetadataFile(t, dir, "b-4"); got != want {
		t.Fatalf("b-4 partition.metadata %q", got)
	}
	// Internal topics have ids too.
	if err := e.Frontend().CommitOffsets("g", map[TopicPartition]OffsetAndMetadata{{"a", 0}: {1, ""}}); err != nil {
		t.Fatal(err)
	}
	offsetsID, ok := e.topicIDOf(ConsumerOffsetsTopic)
	if !ok {
		t.Fatal("no id for the offsets topic")
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	// Persistent across reopen.
	e = openEngine(t, dir, Options{})
	for topic, id := range map[string][16]byte{"a": a, "b": b, ConsumerOffsetsTopic: offsetsID} {
		if got, _ := e.topicIDOf(topic); got != id {
			t.Fatalf("%s: id %x after reopen, want %x", topic, got, id)
		}
	}
	for i := range 5 {
		if mustPartition(t, e, "b", i).TopicID() != b {
			t.Fatalf("b-%d: id changed on reopen", i)
		}
	}
	e.kill()

	// A data dir from before ids: a topic with no file gets a new id, a
	// partition without one its topic's.
	if err := os.Remove(filepath.Join(dir, "a-0", partitionMetadataFile)); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 3} {
		if err := os.Remove(filepath.Join(dir, partitionKey("b", i), partitionMetadataFile)); err != nil {
			t.Fatal(err)
		}
	}
	e = openEngine(t, dir, Options{})
	a2, ok := e.topicIDOf("a")
	if !ok || a2 == a || a2 == b || a2 == offsetsID {
		t.Fatalf("a without metadata: id %x (old %x)", a2, a)
	}
	if got := readMetadataFile(t, dir, "a-0"); got != "version: 0\ntopic_id: "+topicIDString(a2)+"\n" {
		t.Fatalf("a-0 partition.metadata %q", got)
	}
	if id, _ := e.topicIDOf("b"); id != b {
		t.Fatal("b's id changed when two partitions lost the file")
	}
	for _, i := range []int{0, 3} {
		if got := readMetadataFile(t, dir, partitionKey("b", i)); got != want {
			t.Fatalf("b-%d partition.metadata %q after reopen", i, got)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openEngine(t, dir, Options{})
	if id, _ := e.topicIDOf("a"); id != a2 {
		t.Fatal("a's assigned id did not persist")
	}
	// Delete and recreate: a new id.
	if err := e.DeleteTopic("b"); err != nil {
		t.Fatal(err)
	}
	if err := e.CreateTopic("b", 2); err != nil {
		t.Fatal(err)
	}
	b2, _ := e.topicIDOf("b")
	if b2 == b {
		t.Fatal("recreated topic has the old id")
	}
	if name, ok := e.topicByID(b2); !ok || name != "b" {
		t.Fatal("recreated topic's id does not resolve")
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	// Disagreeing or damaged files stop Open rather than mix topics.
	b1 := filepath.Join(dir, "b-1", partitionMetadataFile)
	good, _ := os.ReadFile(b1)
	if err := os.WriteFile(b1, []byte("version: 0\ntopic_id: "+topicIDString(a2)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{}); err == nil || !strings.Contains(err.Error(), "topic id") {
		t.Fatalf("open with disagreeing ids: %v", err)
	}
	if err := os.WriteFile(b1, []byte("version: 1\ntopic_id: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{}); err == nil {
		t.Fatal("open with a damaged partition.metadata succeeded")
	}
	if err := os.WriteFile(b1, good, 0o644); err != nil {
		t.Fatal(err)
	}
	e = openEngine(t, dir, Options{})
	defer e.Close()
	if id, _ := e.topicIDOf("b"); id != b2 {
		t.Fatal("b's id after repairing the file")
	}
}

// Internal topics keep every segment whatever the retention settings:
// without compaction, deleting one would lose offsets or transaction
// state.
func TestInternalTopicsExemptFromRetention(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	now := time.Now()
	var clockMu sync.Mutex
	opts := Options{
		Partition: partition.Options{
			Segment:        segment.Options{MaxBytes: 2048, IndexMaxBytes: 4096, IndexIntervalBytes: 256, ReserveAhead: 4096},
			RetentionAge:   time.Millisecond,
			RetentionBytes: 1,
		},
		Now: func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return now },
	}
	advance := func(d time.Duration) { clockMu.Lock(); now = now.Add(d); clockMu.Unlock() }
	e := openEngine(t, dir, opts)
	if err := e.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	const group = "g"
	tp := TopicPartition{"t", 0}
	pid, _, err := e.initProducerID()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if err := e.Frontend().CommitOffsets(group, map[TopicPartition]OffsetAndMetadata{tp: {int64(i), strings.Repeat("m", 40)}}); err != nil {
			t.Fatal(err)
		}
		if _, err := mustPartition(t, e, "t", 0).Append(idem(t, pid, 0, int32(i), 1, now.UnixMilli())); err != nil {
			t.Fatal(err)
		}
	}
	// Transactions roll __transaction_state.
	for i := range 40 {
		txp, err := e.NewTransactionalProducer("txn-"+strings.Repeat("x", i%5), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := txnSend(t, txp, mustPartition(t, e, "t", 0), byte(i)); err != nil {
			t.Fatal(err)
		}
		if err := txp.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	advance(time.Hour)
	segs := func(topic string, i int) int {
		ents, err := os.ReadDir(filepath.Join(dir, partitionKey(topic, i)))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, ent := range ents {
			if strings.HasSuffix(ent.Name(), ".log") {
				n++
			}
		}
		return n
	}
	offsetsPartition := groupPartition(group)
	before := map[string]int{
		ConsumerOffsetsTopic: segs(ConsumerOffsetsTopic, offsetsPartition),
		txnStateTopic:        segs(txnStateTopic, 0),
	}
	for topic, n := range before {
		if n < 3 {
			t.Fatalf("%s rolled only %d segments: the test does not exercise retention", topic, n)
		}
	}
	for _, p := range e.Partitions() {
		deleted, err := p.log.ApplyRetention()
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case IsInternalTopic(p.Topic()) && (deleted != 0 || p.log.LogStartOffset() != 0):
			t.Fatalf("%s-%d: retention deleted %d segments (log start %d)", p.Topic(), p.Index(), deleted, p.log.LogStartOffset())
		case p.Topic() == "t" && deleted == 0:
			t.Fatal("retention deleted nothing from a plain topic: the settings are not in effect")
		}
	}
	for topic, n := range before {
		part := 0
		if topic == ConsumerOffsetsTopic {
			part = offsetsPartition
		}
		if got := segs(topic, part); got != n {
			t.Fatalf("%s: %d segments, had %d", topic, got, n)
		}
	}
	c, err := e.coordinator()
	if err != nil {
		t.Fatal(err)
	}
	_, epoch, state, ok := c.State("txn-xx")
	if !ok {
		t.Fatal("no coordinator state")
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopened with the same settings: offsets and transaction state load.
	e = openEngine(t, dir, opts)
	defer e.Close()
	for _, p := range e.Partitions() {
		if IsInternalTopic(p.Topic()) {
			if n, err := p.log.ApplyRetention(); err != nil || n != 0 {
				t.Fatalf("%s-%d after reopen: retention deleted %d (%v)", p.Topic(), p.Index(), n, err)
			}
		}
	}
	wantOffsets(t, e, group, true, map[TopicPartition]OffsetAndMetadata{tp: {199, strings.Repeat("m", 40)}})
	c, err = e.coordinator()
	if err != nil {
		t.Fatal(err)
	}
	if _, epoch2, state2, ok := c.State("txn-xx"); !ok || epoch2 != epoch || state2 != state {
		t.Fatalf("coordinator state after reopen: epoch %d state %v ok %v, want %d %v", epoch2, state2, ok, epoch, state)
	}
}
