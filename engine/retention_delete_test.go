package engine

import (
	"testing"
)

// ApplyRetention racing DeleteTopic: the deleted partitions have no
// retention left to apply, which is no error.
func TestApplyRetentionSkipsDeletedTopic(t *testing.T) {
	t.Parallel()
	e := openEngine(t, t.TempDir(), Options{})
	for _, topic := range []string{"a", "b"} {
		if err := e.CreateTopic(topic, 2); err != nil {
			t.Fatal(err)
		}
	}
	deleted := false
	e.opts.private.applyRetentionHook = func(*Partition) {
		if !deleted {
			deleted = true
			if err := e.DeleteTopic("a"); err != nil {
				t.Error(err)
			}
		}
	}
	if _, err := e.applyRetention(); err != nil {
		t.Fatalf("ApplyRetention with a topic deleted meanwhile: %v", err)
	}
	if !deleted {
		t.Fatal("hook did not run")
	}
}
