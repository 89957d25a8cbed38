package engine

import (
	"testing"
	"time"

	"github.com/idemlog/idemlog/partition"
)

// appendSynced appends one batch to p and reports whether it was durable
// (the recovery point past it) when the append returned, and whether a
// sync ran for it.
func appendSynced(t *testing.T, p *Partition, value string) (durable, synced bool) {
	t.Helper()
	syncs := p.log.Syncs()
	res, err := p.Append(plainRecordBatch(t, value))
	if err != nil {
		t.Fatal(err)
	}
	return p.log.RecoveryPoint() > res.LastOffset, p.log.Syncs() > syncs
}

// TestTopicFlushMessagesLive: under an engine that never syncs, a topic
// created with flush.messages=1 acknowledges only synced batches; an
// IncrementalAlterConfigs back to the default stops the syncing, an
// AlterConfigs that sets it again starts it, without a reopen, and the
// setting holds across one.
func TestTopicFlushMessagesLive(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Partition: partition.Options{Sync: partition.SyncPolicy{Kind: partition.SyncNever}}}
	e := openEngine(t, dir, opts)
	if err := e.CreateTopic("f", 1, map[string]string{"flush.messages": "1"}); err != nil {
		t.Fatal(err)
	}
	if err := e.CreateTopic("plain", 1); err != nil {
		t.Fatal(err)
	}
	p, err := e.Partition("f", 0)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := e.Partition("plain", 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if durable, synced := appendSynced(t, p, "a"); !durable || !synced {
			t.Fatalf("append %d to a flush.messages=1 topic: durable %v, synced %v", i, durable, synced)
		}
	}
	if durable, synced := appendSynced(t, plain, "a"); durable || synced {
		t.Fatalf("append to a topic without flush.*: durable %v, synced %v; the engine never syncs", durable, synced)
	}
	if err := e.incrementalAlterTopicConfig("f", []ConfigOp{{Name: "flush.messages", Op: ConfigDelete}}, false); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if durable, synced := appendSynced(t, p, "b"); durable || synced {
			t.Fatalf("append %d after flush.messages was deleted: durable %v, synced %v", i, durable, synced)
		}
	}
	if err := e.replaceTopicConfig("f", map[string]string{"flush.messages": "1"}, false); err != nil {
		t.Fatal(err)
	}
	if durable, synced := appendSynced(t, p, "c"); !durable || !synced {
		t.Fatalf("append after AlterConfigs set flush.messages=1: durable %v, synced %v", durable, synced)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openEngine(t, dir, opts)
	defer e.Close()
	if p, err = e.Partition("f", 0); err != nil {
		t.Fatal(err)
	}
	if durable, synced := appendSynced(t, p, "d"); !durable || !synced {
		t.Fatalf("append after a reopen of a flush.messages=1 topic: durable %v, synced %v", durable, synced)
	}
}

// TestTopicFlushMsLive: flush.ms set by an alteration starts a sync by
// time on the open partition, which makes a batch nobody waited for
// durable.
func TestTopicFlushMsLive(t *testing.T) {
	e := openEngine(t, t.TempDir(), Options{})
	defer e.Close()
	if err := e.CreateTopic("f", 1); err != nil {
		t.Fatal(err)
	}
	p, err := e.Partition("f", 0)
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Append(plainRecordBatch(t, "a"))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.incrementalAlterTopicConfig("f", []ConfigOp{{Name: "flush.ms", Op: ConfigSet, Value: "5"}}, false); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for p.log.RecoveryPoint() <= res.LastOffset {
		if time.Now().After(deadline) {
			t.Fatalf("flush.ms=5: recovery point %d 10s later, batch ends at %d", p.log.RecoveryPoint(), res.LastOffset)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestTopicFlushConfigMapping: how flush.messages and flush.ms map onto
// the partition's flush policy (docs/CONFIGS.md).
func TestTopicFlushConfigMapping(t *testing.T) {
	for _, c := range []struct {
		cfg  map[string]string
		want partition.FlushPolicy
	}{
		{map[string]string{}, partition.FlushPolicy{}},
		{map[string]string{"flush.messages": longMax, "flush.ms": longMax}, partition.FlushPolicy{}},
		{map[string]string{"flush.messages": "1"}, partition.FlushPolicy{Messages: 1}},
		{map[string]string{"flush.messages": "1000"}, partition.FlushPolicy{Messages: 1000}},
		{map[string]string{"flush.ms": "0"}, partition.FlushPolicy{Messages: 1}},
		{map[string]string{"flush.ms": "0", "flush.messages": "1000"}, partition.FlushPolicy{Messages: 1}},
		{map[string]string{"flush.ms": "250"}, partition.FlushPolicy{Interval: 250 * time.Millisecond}},
		{map[string]string{"flush.ms": "250", "flush.messages": "10"}, partition.FlushPolicy{Messages: 10, Interval: 250 * time.Millisecond}},
		{map[string]string{"flush.ms": "9223372036854"}, partition.FlushPolicy{}},
	} {
		var o partition.Options
		if _, err := applyTopicConfig(&o, c.cfg); err != nil {
			t.Fatal(err)
		}
		if o.Flush != c.want || o.Sync != (partition.SyncPolicy{}) {
			t.Errorf("%v: flush %v, sync %v; want flush %v and the engine's sync untouched", c.cfg, o.Flush, o.Sync, c.want)
		}
	}
}
