package partition

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/idemlog/idemlog/segment"
)

// TestSealSnapshotSyncFails: the seal's sync of the roll's
// snapshot fails (here: a symlink loop in the snapshot's place, ELOOP at
// open). The log fails, the recovery point does not pass the roll, and
// every batch appended before is there after a reopen.
func TestSealSnapshotSyncFails(t *testing.T) {
	t.Parallel()
	for _, kind := range []SyncKind{SyncNever, SyncAlways, SyncBytes} {
		dir := t.TempDir()
		opts := smallSegments(4096)
		opts.Sync = SyncPolicy{Kind: kind, Bytes: 1000}
		opts.Snapshot = func(off int64) []byte { return []byte{1} }
		l, err := Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		var sent [][]byte
		i := 0
		app := func() error {
			b := makeBatch(t, i, 1, 300, int64(i))
			_, err := l.Append(b)
			if err == nil {
				sent = append(sent, b)
			}
			i++
			return err
		}
		for range 5 {
			if err := app(); err != nil {
				t.Fatal(err)
			}
		}
		l.waitIdle()
		l.maint.drop.Store(true)
		for len(*l.segs.Load()) == 1 {
			if err := app(); err != nil {
				t.Fatal(err)
			}
		}
		l.waitIdle()
		l.maint.drop.Store(false)
		base := (*l.segs.Load())[1].Base()
		snap := filepath.Join(dir, segment.FileName(base, ".snapshot"))
		if err := os.Remove(snap); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Base(snap), snap); err != nil {
			t.Fatal(err)
		}
		l.unsealedMu.Lock()
		old := l.unsealed[0]
		l.unsealedMu.Unlock()
		old.acquire()
		l.sealRolled(old, base)
		if !l.failed.Load() {
			t.Fatalf("%v: seal whose snapshot sync failed did not fail the log", kind)
		}
		if rp := l.RecoveryPoint(); kind == SyncNever && rp >= base {
			t.Fatalf("%v: recovery point %d past the roll at %d", kind, rp, base)
		}
		if err := app(); !errors.Is(err, ErrFailed) {
			t.Fatalf("%v: append after the failure: %v", kind, err)
		}
		if err := l.Close(); err == nil {
			t.Fatalf("%v: close after the failure succeeded", kind)
		}
		os.Remove(snap)
		l, err = Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		got := readAll(t, l)
		if len(got) != len(sent) {
			t.Fatalf("%v: %d batches after reopen, %d acknowledged", kind, len(got), len(sent))
		}
		var off int64
		for j := range got {
			sameBatch(t, got[j], sent[j], off)
			off = got[j].NextOffset()
		}
		l.Close()
	}
}
