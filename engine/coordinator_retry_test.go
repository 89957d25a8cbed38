package engine

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A coordinator that fails to open is tried again by the next call: the
// failure (here a file in the way of __transaction_state's directory,
// standing for a transient I/O error) is not kept for the engine's life.
func TestCoordinatorOpenRetried(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	blocker := filepath.Join(dir, partitionKey(txnStateTopic, 0))
	if err := os.WriteFile(blocker, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := e.coordinator(); err == nil {
		t.Fatal("Coordinator opened with its partition's directory blocked")
	}
	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	c, err := e.coordinator()
	if err != nil {
		t.Fatalf("Coordinator after the obstacle went: %v", err)
	}
	if _, _, err := c.InitProducerID("tx", time.Minute); err != nil {
		t.Fatal(err)
	}
	if again, _ := e.coordinator(); again != c {
		t.Fatal("a second coordinator was made")
	}
}
