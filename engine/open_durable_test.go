package engine

import (
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/idemlog/idemlog/internal/fsutil"
)

// dirSyncs records the directories synced while it is observing.
type dirSyncs struct {
	mu   sync.Mutex
	dirs []string
}

func observeDirSyncs(t *testing.T) *dirSyncs {
	r := &dirSyncs{}
	stop := fsutil.ObserveDirSyncs(func(dir string) {
		r.mu.Lock()
		r.dirs = append(r.dirs, filepath.Clean(dir))
		r.mu.Unlock()
	})
	t.Cleanup(stop)
	return r
}

func (r *dirSyncs) synced(dir string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.dirs, filepath.Clean(dir))
}

// TestOpenMakesDataDirDurable: Open creating the data dir (and the
// directories above it) syncs each one's parent before it returns, so a
// machine crash cannot take the dir, with the producer-id block and
// everything acknowledged in it, away.
func TestOpenMakesDataDirDurable(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "srv", "data")
	syncs := observeDirSyncs(t)
	e := openEngine(t, dir, Options{MaintainInterval: -1})
	defer e.Close()
	for _, parent := range []string{base, filepath.Join(base, "srv")} {
		if !syncs.synced(parent) {
			t.Errorf("%s not synced after a directory was created in it", parent)
		}
	}
}

// TestCreateTopicMakesPartitionDirDurable: a partition's directory is
// synced (its config and partition.metadata) and its name synced into the
// data dir before CreateTopic returns.
func TestCreateTopicMakesPartitionDirDurable(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, Options{MaintainInterval: -1})
	defer e.Close()
	syncs := observeDirSyncs(t)
	if err := e.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	if !syncs.synced(dir) {
		t.Error("the data dir was not synced after the partition's directory was renamed into it")
	}
	syncs.mu.Lock()
	defer syncs.mu.Unlock()
	// The temporary directory (its entries) is synced before the rename.
	for _, d := range syncs.dirs {
		if d != dir && filepath.Dir(d) == dir && filepath.Base(d) != "t-0" {
			return
		}
	}
	t.Errorf("the new partition's directory was not synced before its rename: %q", syncs.dirs)
}
