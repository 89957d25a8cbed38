package engine

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/idemlog/idemlog/batch"
)

// cutPower stops e as a power cut would leave its logs: every partition
// keeps the batches its last sync covered (its recovery point) and loses
// the rest, which is zeroed in place, as unsynced pages of a preallocated
// segment read after a cut. The page cache's copy of everything else
// (checkpoints, snapshots, indexes, directories) is kept: the tests that
// use it are about the order of the logs' syncs.
func cutPower(t *testing.T, e *Engine) {
	t.Helper()
	type synced struct {
		dir string
		end int64
	}
	var logs []synced
	for _, p := range e.Partitions() {
		logs = append(logs, synced{p.log.Dir(), p.log.RecoveryPoint()})
	}
	e.kill()
	for _, l := range logs {
		dropUnsynced(t, l.dir, l.end)
	}
}

// dropUnsynced zeroes every batch at or past offset end in the segments of
// the partition directory dir.
func dropUnsynced(t *testing.T, dir string, end int64) {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	for _, name := range names {
		if strings.HasPrefix(filepath.Base(name), ".") {
			continue
		}
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		pos := 0
		for pos < len(data) {
			n, err := batch.Size(data[pos:])
			if err != nil || int64(binary.BigEndian.Uint64(data[pos:])) >= end {
				break
			}
			pos += n
		}
		if pos == len(data) {
			continue
		}
		f, err := os.OpenFile(name, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(make([]byte, len(data)-pos), int64(pos)); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
