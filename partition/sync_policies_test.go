package partition

import (
	"path/filepath"
	"testing"
	"time"
)

// TestPoliciesRollsKill: under every sync policy, appends that
// roll (the roll writing its snapshot) and a crash (Kill) at several
// points: every acknowledged batch is there after the reopen, offsets are
// dense, the checkpointed recovery point is not past the log end, and
// every segment base but the first has its snapshot.
func TestPoliciesRollsKill(t *testing.T) {
	t.Parallel()
	policies := []SyncPolicy{{Kind: SyncNever}, {Kind: SyncAlways}, {Kind: SyncInterval, Interval: time.Millisecond}, {Kind: SyncBytes, Bytes: 2000}}
	for _, pol := range policies {
		dir := t.TempDir()
		opts := smallSegments(4096)
		opts.Sync = pol
		opts.Snapshot = func(off int64) []byte { return []byte{byte(off)} }
		var sent [][]byte
		id := 0
		for round := range 4 {
			l, err := Open(dir, opts)
			if err != nil {
				t.Fatalf("%v round %d: %v", pol, round, err)
			}
			if err := l.FinishRecovery(); err != nil {
				t.Fatal(err)
			}
			got := readAll(t, l)
			if len(got) != len(sent) {
				t.Fatalf("%v round %d: %d batches, %d acknowledged", pol, round, len(got), len(sent))
			}
			var off int64
			for i := range got {
				sameBatch(t, got[i], sent[i], off)
				off = got[i].NextOffset()
			}
			if rp, err := readCheckpoint(filepath.Join(dir, recoveryPointFile)); err != nil || rp > l.LogEndOffset() {
				t.Fatalf("%v round %d: checkpointed recovery point %d, log end %d (%v)", pol, round, rp, l.LogEndOffset(), err)
			}
			snaps := map[int64]bool{}
			for _, s := range snapshotFiles(t, dir) {
				snaps[s] = true
			}
			for _, b := range l.SegmentBases()[1:] {
				if !snaps[b] {
					t.Fatalf("%v round %d: no snapshot at base %d", pol, round, b)
				}
			}
			for range 40 + 13*round {
				b := makeBatch(t, id, 1+id%3, 100+id%200, int64(id))
				id++
				if _, err := l.Append(b); err != nil {
					t.Fatal(err)
				}
				sent = append(sent, b)
			}
			if round%2 == 1 {
				l.waitIdle()
			}
			l.Kill()
		}
	}
}
