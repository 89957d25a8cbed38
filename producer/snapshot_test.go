package producer

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSnapshotReadErrorKeepsFile: a snapshot that cannot be
// read (an I/O error: here a directory in its place, EISDIR) was deleted as
// if corrupt, and the load went on with an older one. The load fails and
// leaves it; a snapshot that does not parse is still deleted.
func TestSnapshotReadErrorKeepsFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var w SnapshotWriter
	w.Reset()
	w.Add(SnapshotEntry{ProducerID: 1, Epoch: 0, LastSequence: 4, LastOffset: 4, Timestamp: 1, TxnFirstOffset: -1})
	if err := os.WriteFile(filepath.Join(dir, SnapshotName(5)), w.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	unreadable := filepath.Join(dir, SnapshotName(10))
	if err := os.Mkdir(unreadable, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadAtMost(dir, 20); err == nil {
		t.Fatal("LoadAtMost with an unreadable newest snapshot succeeded")
	}
	if _, err := os.Stat(unreadable); err != nil {
		t.Fatalf("the unreadable snapshot was removed: %v", err)
	}
	// A corrupt one is deleted and the older one used.
	if err := os.Remove(unreadable); err != nil {
		t.Fatal(err)
	}
	corrupt := filepath.Join(dir, SnapshotName(10))
	if err := os.WriteFile(corrupt, []byte("not a snapshot"), 0o644); err != nil {
		t.Fatal(err)
	}
	entries, at, err := LoadAtMost(dir, 20)
	if err != nil || at != 5 || len(entries) != 1 {
		t.Fatalf("LoadAtMost past a corrupt snapshot: %d entries at %d, %v; want 1 at 5", len(entries), at, err)
	}
	if _, err := os.Stat(corrupt); !os.IsNotExist(err) {
		t.Fatalf("the corrupt snapshot is still there: %v", err)
	}
}
