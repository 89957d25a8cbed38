package engine

import (
	"errors"
	"testing"

	"github.com/idemlog/idemlog/batch"
)

// TestTopicConfig: a topic's max.message.bytes bounds its batches and no
// other topic's, survives a reopen, and bad configs are refused.
func TestTopicConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.CreateTopic("small", 1, map[string]string{"max.message.bytes": "1000", "segment.bytes": "1048576"}); err != nil {
		t.Fatal(err)
	}
	if err := e.CreateTopic("big", 1); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []map[string]string{{"cleanup.policy": "compacted"}, {"max.message.bytes": "x"}, {"max.message.bytes": "-1"}, {"retention.ms": "-5"}, {"no.such.config": "1"}} {
		if err := e.CreateTopic("bad", 1, bad); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%v: %v, want ErrInvalidConfig", bad, err)
		}
	}
	if _, ok := e.Topics()["bad"]; ok {
		t.Fatal("a topic with a bad config was created")
	}
	bld := batch.NewBuilder(batch.CodecNone)
	bld.Append(1, nil, make([]byte, 2000), nil)
	b, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	check := func(e *Engine) {
		t.Helper()
		small, _ := e.Partition("small", 0)
		if _, err := small.Append(b); !errors.Is(err, batch.ErrTooLarge) {
			t.Fatalf("small: %v, want ErrTooLarge", err)
		}
		big, _ := e.Partition("big", 0)
		if _, err := big.Append(b); err != nil {
			t.Fatalf("big: %v", err)
		}
	}
	check(e)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if e, err = Open(dir, Options{}); err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	check(e)
}
