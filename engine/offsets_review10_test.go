package engine

import (
	"testing"

	"github.com/idemlog/idemlog/producer"
)

// A pending transactional commit, then a later plain commit of the same
// partition (current: later in the log), then a deletion whose tombstone is
// written before the transaction's COMMIT marker. In log order the
// tombstone deletes the plain offset and the COMMIT marker then installs the
// transactional one (nothing current to be older than), which is what a
// replay rebuilds. Live, the marker runs between the tombstone's write and
// its registration: it compares against the plain offset the tombstone is
// about to delete, loses, and the deletion then leaves nothing.
func TestReview10MarkerInTombstoneWindowLostAgainstDeletedOffset(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	const g = "g"
	tp := TopicPartition{"t", 0}
	pid, epoch, err := e.InitProducerID()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.TxnCommitOffsets(g, pid, epoch, map[TopicPartition]OffsetAndMetadata{tp: {7, "txn"}}); err != nil {
		t.Fatal(err)
	}
	if err := e.CommitOffsets(g, map[TopicPartition]OffsetAndMetadata{tp: {9, "plain"}}); err != nil {
		t.Fatal(err)
	}
	offsetsTombstonedHook = func(p *Partition) {
		if _, err := p.WriteMarker(producer.Marker{ProducerID: pid, Epoch: epoch, Commit: true}); err != nil {
			t.Error(err)
		}
	}
	defer func() { offsetsTombstonedHook = nil }()
	if had, err := e.DeleteGroupOffsets(g); err != nil || !had {
		t.Fatalf("delete: %v %v", had, err)
	}
	offsetsTombstonedHook = nil
	live, err := e.FetchOffsets(g, []TopicPartition{tp}, true)
	if err != nil {
		t.Fatal(err)
	}
	e.Kill()
	e = openEngine(t, dir, Options{})
	defer e.Close()
	replayed, err := e.FetchOffsets(g, []TopicPartition{tp}, true)
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
func TestReview10GroupPartitionInvalidUTF8MatchesJava(t *testing.T) {
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
		if p := GroupPartition(c.group); p != want {
			t.Errorf("GroupPartition(%q) = %d, want %d (Kafka)", c.group, p, want)
		}
	}
}
