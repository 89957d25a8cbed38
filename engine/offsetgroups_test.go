package engine

import (
	"slices"
	"testing"
)

// TestOffsetGroups: OffsetGroups lists, sorted, exactly the groups for
// which GroupHasOffsets holds: committed offsets or pending transactional
// ones, not deleted ones, after a reopen too.
func TestOffsetGroups(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	want := func(e *Engine, groups ...string) {
		t.Helper()
		got, err := e.offsetGroups()
		if err != nil || !slices.Equal(got, groups) {
			t.Fatalf("OffsetGroups = %q, %v; want %q", got, err, groups)
		}
		for _, g := range got {
			if !e.groupHasOffsets(g) {
				t.Fatalf("%q listed without offsets", g)
			}
		}
	}
	want(e)
	tp := TopicPartition{"orders", 0}
	for _, g := range []string{"b", "a", sameOffsetsPartition("a"), "gone"} {
		if err := e.Frontend().CommitOffsets(g, map[TopicPartition]OffsetAndMetadata{tp: {1, ""}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.deleteGroupOffsets("gone"); err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := e.initProducerID()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Frontend().TxnCommitOffsets("pending", pid, epoch, map[TopicPartition]OffsetAndMetadata{tp: {2, ""}}); err != nil {
		t.Fatal(err)
	}
	all := []string{"a", "b", sameOffsetsPartition("a"), "pending"}
	slices.Sort(all)
	want(e, all...)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openEngine(t, dir, Options{})
	want(e, all...)
}
