package partition

import (
	"path/filepath"
	"testing"
)

// After an unclean shutdown the checkpointed recovery point stays where
// recovery began until the owner calls FinishRecovery (the engine, once
// its replay rebuilt the aborted-transaction indexes of the scanned
// segments); Abandon leaves it there for the next Open.
func TestRecoveryPointWaitsForFinishRecovery(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, err := Open(dir, smallSegments(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if _, err := l.Append(makeBatch(t, 2*i, 2, 100, 1)); err != nil {
			t.Fatal(err)
		}
	}
	l.Kill() // unclean: recovery point 0 on disk

	checkpoint := func(want int64, when string) {
		t.Helper()
		got, err := readCheckpoint(filepath.Join(dir, recoveryPointFile))
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("%s: checkpointed recovery point %d, want %d", when, got, want)
		}
	}
	l, err = Open(dir, smallSegments(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	if rf := l.RecoveredFrom(); rf != 0 {
		t.Fatalf("RecoveredFrom %d, want 0", rf)
	}
	checkpoint(0, "after the unclean Open")
	l.Abandon()
	l, err = Open(dir, smallSegments(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	checkpoint(0, "after Abandon and another Open")
	if err := l.FinishRecovery(); err != nil {
		t.Fatal(err)
	}
	checkpoint(8, "after FinishRecovery")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}
