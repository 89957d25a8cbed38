package partition

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/segment"
)

// The staging window (sync.go: startStaging, endStaging) is driven by hand
// here: a test opens it as a group sync's leader would, appends, and checks
// what is in the file, visible and durable before and after it closes.

// appendNoWait appends raw with AppendBatch and returns its result.
func appendNoWait(t *testing.T, l *Log, raw []byte) AppendResult {
	t.Helper()
	v, err := batch.Validate(raw, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	res, wait, err := l.AppendBatch(v, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !wait {
		t.Fatal("SyncAlways append does not ask for a wait")
	}
	return res
}

// fileBytes reads the log's active segment file as it is on the file system
// (what a crash would keep, the page cache aside).
func fileBytes(t *testing.T, l *Log) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(l.dir, segment.FileName(l.active.Base(), ".log")))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestStagedAppendsWaitForSyncEnd(t *testing.T) {
	t.Parallel()
	for _, durable := range []bool{false, true} {
		// This test is the sync leader (startStaging, endStaging): no
		// visibility syncer may sync meanwhile.
		l, err := Open(t.TempDir(), Options{Sync: SyncPolicy{Kind: SyncAlways}, DurableVisibility: durable, noVisibilitySyncer: true})
		if err != nil {
			t.Fatal(err)
		}
		first := makeBatch(t, 0, 3, 100, 1)
		if _, err := l.Append(first); err != nil {
			t.Fatal(err)
		}
		hw, written := l.HighWatermark(), l.active.Written()
		end, err := l.startStaging()
		if err != nil {
			t.Fatal(err)
		}
		if end != hw {
			t.Fatalf("sync covers up to %d, want %d", end, hw)
		}
		var sent [][]byte
		for i := range 5 {
			raw := makeBatch(t, 1+i, 2, 200, 1)
			sent = append(sent, raw)
			appendNoWait(t, l, raw)
		}
		// Staged: not in the file, not visible, not durable.
		if got := l.active.Written(); got != written {
			t.Errorf("durable=%v: %d bytes written during staging, want %d", durable, got, written)
		}
		if got := l.HighWatermark(); got != hw {
			t.Errorf("durable=%v: high watermark %d while staged, want %d", durable, got, hw)
		}
		if got := l.active.Staged(); got == 0 {
			t.Errorf("durable=%v: nothing staged", durable)
		}
		if fb := fileBytes(t, l); bytes.Contains(fb, sent[0][batch.HeaderSize:]) {
			t.Errorf("durable=%v: a staged batch is in the file before the sync's end", durable)
		}
		l.endStaging()
		// Written, and visible unless readers wait for durability.
		if got := l.active.Staged(); got != 0 {
			t.Errorf("durable=%v: %d bytes still staged", durable, got)
		}
		fb := fileBytes(t, l)
		for i, raw := range sent {
			if !bytes.Contains(fb, raw[batch.HeaderSize:]) {
				t.Errorf("durable=%v: staged batch %d not in the file after the sync's end", durable, i)
			}
		}
		wantHW := hw + 10
		if durable {
			wantHW = hw
		}
		if got := l.HighWatermark(); got != wantHW {
			t.Errorf("durable=%v: high watermark %d after the sync's end, want %d", durable, got, wantHW)
		}
		if err := l.WaitDurable(hw + 10); err != nil {
			t.Fatal(err)
		}
		if got := l.HighWatermark(); got != hw+10 {
			t.Errorf("durable=%v: high watermark %d once durable, want %d", durable, got, hw+10)
		}
		got := readAll(t, l)
		if len(got) != 6 {
			t.Fatalf("durable=%v: read %d batches, want 6", durable, len(got))
		}
		for i, raw := range sent {
			sameBatch(t, got[1+i], raw, got[1+i].BaseOffset())
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStagedRoll: a roll while staging writes the old segment's stage
// before it leaves the writer, and staging goes on in the new segment.
func TestStagedRoll(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := smallSegments(4096)
	opts.Sync.Kind = SyncAlways
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.startStaging(); err != nil {
		t.Fatal(err)
	}
	var sent [][]byte
	for i := range 20 { // about 6 segments
		raw := makeBatch(t, i, 2, 300, 1)
		sent = append(sent, raw)
		appendNoWait(t, l, raw)
	}
	if n := len(*l.segs.Load()); n < 4 {
		t.Fatalf("%d segments, want several rolls", n)
	}
	if l.active.Staged() == 0 {
		t.Fatal("the new active segment does not stage")
	}
	l.endStaging()
	if err := l.WaitDurable(40); err != nil {
		t.Fatal(err)
	}
	check := func(l *Log) {
		t.Helper()
		got := readAll(t, l)
		if len(got) != len(sent) {
			t.Fatalf("read %d batches, want %d", len(got), len(sent))
		}
		for i, raw := range sent {
			sameBatch(t, got[i], raw, int64(2*i))
		}
	}
	check(l)
	l.Kill() // acknowledged (durable): it must all be there without Close
	l, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	check(l)
}

// stagedAfterOne opens a log in dir, appends one batch (durable), opens a
// staging window as a sync's leader would, and appends a second batch,
// which is staged; it returns the log, the second batch and its result.
func stagedAfterOne(t *testing.T, dir string, opts Options) (*Log, []byte, AppendResult) {
	t.Helper()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(makeBatch(t, 0, 1, 100, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.startStaging(); err != nil {
		t.Fatal(err)
	}
	raw := makeBatch(t, 1, 1, 100, 1)
	return l, raw, appendNoWait(t, l, raw)
}

// TestStagedKillAndClose: a crash drops what is staged (none of it was
// acknowledged); Close writes it.
func TestStagedKillAndClose(t *testing.T) {
	t.Parallel()
	for _, kill := range []bool{true, false} {
		dir, opts := t.TempDir(), Options{Sync: SyncPolicy{Kind: SyncAlways}}
		l, _, _ := stagedAfterOne(t, dir, opts)
		if kill {
			l.Kill()
		} else if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l.endStaging() // after either: must leave the files alone
		l, err := Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		want := int64(2)
		if kill {
			want = 1
		}
		if got := l.LogEndOffset(); got != want {
			t.Errorf("kill=%v: log end %d after reopening, want %d", kill, got, want)
		}
		l.Close()
	}
}

// TestStagedFlushBound: a stage that reaches stageFlushBytes is written by
// the next append, so a slow sync does not hold unbounded memory.
func TestStagedFlushBound(t *testing.T) {
	t.Parallel()
	l, err := Open(t.TempDir(), Options{Sync: SyncPolicy{Kind: SyncAlways}, Segment: segment.Options{MaxBytes: 64 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.startStaging(); err != nil {
		t.Fatal(err)
	}
	raw := makeBatch(t, 0, 10, 10_000, 1)
	for range 3*stageFlushBytes/len(raw) + 2 {
		appendNoWait(t, l, raw)
		if got := l.active.Staged(); got > stageFlushBytes+len(raw) {
			t.Fatalf("%d bytes staged, bound %d", got, stageFlushBytes+len(raw))
		}
	}
	if l.active.Written() == 0 {
		t.Fatal("nothing written past the bound")
	}
	l.endStaging()
}

// TestStagedGroupCommit: appenders racing with syncs (so staging) lose
// nothing and duplicate nothing; every acknowledged batch is durable, and
// after a kill it is all there, in order.
func TestStagedGroupCommit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := smallSegments(64 << 10)
	opts.Sync.Kind = SyncAlways
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	const appenders, each = 8, 60
	sent := make([][][]byte, appenders)
	bases := make([][]int64, appenders)
	var wg sync.WaitGroup
	for w := range appenders {
		wg.Go(func() {
			for i := range each {
				raw := makeBatch(t, w*1000+i, 3, 150, 1)
				res, err := l.Append(raw)
				if err != nil {
					t.Error(err)
					return
				}
				if l.RecoveryPoint() <= res.LastOffset {
					t.Errorf("acknowledged %d with recovery point %d", res.LastOffset, l.RecoveryPoint())
				}
				sent[w] = append(sent[w], raw)
				bases[w] = append(bases[w], res.BaseOffset)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	l.Kill()
	l, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got := readAll(t, l)
	if len(got) != appenders*each {
		t.Fatalf("%d batches after reopening, want %d", len(got), appenders*each)
	}
	at := map[int64]batch.Batch{}
	for _, b := range got {
		at[b.BaseOffset()] = b
	}
	for w := range appenders {
		for i, raw := range sent[w] {
			b, ok := at[bases[w][i]]
			if !ok {
				t.Fatalf("batch %d/%d at %d missing", w, i, bases[w][i])
			}
			sameBatch(t, b, raw, bases[w][i])
		}
	}
}

// TestStagedNoAckAfterKill: a batch staged during a sync that a kill (a
// crash) interrupts is never acknowledged: the next sync refuses, rather
// than count staged bytes that are in no file (it used to
// acknowledge them, and reopening lost them).
func TestStagedNoAckAfterKill(t *testing.T) {
	t.Parallel()
	for _, closing := range []bool{false, true} {
		l, raw, res := stagedAfterOne(t, t.TempDir(), Options{Sync: SyncPolicy{Kind: SyncAlways}})
		if closing {
			// What Close does first, before it waits for the maintainer
			// and seals (which writes the stage).
			l.mu.Lock()
			l.closed = true
			l.shut.Store(true)
			l.mu.Unlock()
		} else {
			l.Kill()
		}
		l.endStaging()
		if err := l.WaitDurable(res.LastOffset + 1); !errors.Is(err, ErrClosed) {
			t.Fatalf("closing=%v: WaitDurable(%d) = %v with the batch staged, want ErrClosed", closing, res.LastOffset+1, err)
		}
		if fb := fileBytes(t, l); bytes.Contains(fb, raw[batch.HeaderSize:]) {
			t.Fatalf("closing=%v: staged batch in the file", closing)
		}
		if rp := l.RecoveryPoint(); rp > res.BaseOffset {
			t.Fatalf("closing=%v: recovery point %d covers the staged batch at %d", closing, rp, res.BaseOffset)
		}
	}
}

// TestDurableVisibilityRolledTailPublished: under DurableVisibility a
// rolled segment sealed before the next sync is published by its seal, so
// a reader below the high watermark does not skip its tail (reachable before staging too, by appends that do not wait).
func TestDurableVisibilityRolledTailPublished(t *testing.T) {
	t.Parallel()
	opts := smallSegments(4096)
	opts.Sync.Kind = SyncAlways
	opts.DurableVisibility = true
	l, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Append(makeBatch(t, 0, 2, 300, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.startStaging(); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 12; i++ {
		appendNoWait(t, l, makeBatch(t, i, 2, 300, 1))
	}
	l.endStaging()
	l.waitIdle() // the maintainer sealed the rolled segments
	if err := l.WaitDurable(24); err != nil {
		t.Fatal(err)
	}
	got := readAll(t, l)
	if len(got) != 12 {
		t.Fatalf("read %d batches below the high watermark %d, want 12", len(got), l.HighWatermark())
	}
	for i, b := range got {
		if b.BaseOffset() != int64(2*i) {
			t.Fatalf("batch %d at %d, want %d", i, b.BaseOffset(), 2*i)
		}
	}
}
