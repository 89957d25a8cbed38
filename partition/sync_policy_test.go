package partition

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/segment"
)

// syncRolled appends raw(0) and then, with the maintainer stalled in
// the first seal's checkpoint write (ckMu held by the caller on return),
// raw(1) into its own segment S1 and raw(2), which rolls S1 (whose seal is
// then queued behind the stalled one). One batch per segment.
func syncRolled(t *testing.T, sync SyncPolicy) (l *Log, raw func(int) []byte, a AppendResult, s1 *segRef) {
	t.Helper()
	raw = func(id int) []byte { return makeBatch(t, id, 2, 200, 1) }
	n := int64(len(raw(0)))
	opts := smallSegments(n + 10) // one batch per segment
	opts.Sync = sync
	l, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.abandon)
	if _, _, err := l.AppendBatch(mustValidate(t, raw(0)), nil); err != nil {
		t.Fatal(err)
	}
	l.ckMu.Lock() // stall the maintainer in S0's seal (its checkpoint)
	a, _, err = l.AppendBatch(mustValidate(t, raw(1)), nil)
	if err != nil {
		t.Fatal(err)
	}
	s1 = l.active
	if s1.Base() != a.BaseOffset {
		t.Fatalf("batch at %d not alone in segment %d", a.BaseOffset, s1.Base())
	}
	return l, raw, a, s1
}

// TestSealAfterFailedSealAcks: a rolled segment's seal failed
// (the log is failed: its batches never reached the disk), but the seal
// of the next segment, queued behind it, succeeds, and sealRolled then
// advances the durable mark and the recovery point to that segment's end
// without looking at the failure: WaitDurable for a batch in the segment
// whose seal failed returns success, and the checkpoint tells the next
// Open not to scan it.
func TestSealAfterFailedSealAcks(t *testing.T) {
	t.Parallel()
	l, raw, a, s1 := syncRolled(t, SyncPolicy{Kind: SyncAlways})
	// S1's seal will fail: its descriptor becomes a read-only one of the
	// same file, whose ftruncate fails (as an I/O error would fail it).
	ro, err := os.Open(filepath.Join(l.dir, segment.FileName(s1.Base(), ".log")))
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if err := unix.Dup2(int(ro.Fd()), segmentFD(t, l, s1.Base())); err != nil {
		t.Fatal(err)
	}
	for i := 2; i <= 3; i++ { // roll S1 (seal fails) and S2 (seal succeeds)
		if _, _, err := l.AppendBatch(mustValidate(t, raw(i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	l.ckMu.Unlock()
	l.waitIdle()
	if !l.failed.Load() {
		t.Fatal("S1's seal did not fail the log")
	}
	err = l.WaitDurable(a.LastOffset + 1)
	t.Logf("WaitDurable(%d) = %v; recovery point %d", a.LastOffset+1, err, l.RecoveryPoint())
	if err == nil {
		t.Errorf("batch %d..%d acknowledged durable although its segment's seal (its only fsync) failed", a.BaseOffset, a.LastOffset)
	}
	if rp := l.RecoveryPoint(); rp > a.BaseOffset {
		t.Errorf("recovery point %d passes batch %d..%d whose seal failed: the next Open will not scan it", rp, a.BaseOffset, a.LastOffset)
	}
}

// TestSealAfterFailedSyncAcks: a group sync's fdatasync of a rolled
// segment fails, and the log fails (after a failed fsync the kernel may
// have dropped the dirty pages, and a later fsync of the same file
// reports success: ErrFailed). The segment's seal, queued before, then
// runs and its fsync succeeds, and sealRolled counts the segment durable:
// WaitDurable for the very batch whose sync failed now returns success (a
// producer retrying it is acknowledged as a duplicate), and the recovery
// point is checkpointed past it.
func TestSealAfterFailedSyncAcks(t *testing.T) {
	t.Parallel()
	l, raw, a, s1 := syncRolled(t, SyncPolicy{Kind: SyncAlways})
	if _, _, err := l.AppendBatch(mustValidate(t, raw(2)), nil); err != nil { // rolls S1: its seal queued
		t.Fatal(err)
	}
	fd := segmentFD(t, l, s1.Base())
	saved, err := unix.Dup(fd)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(saved)
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	// fdatasync of a pipe fails (EINVAL), as an fdatasync that hit an I/O
	// error would.
	if err := unix.Dup2(p[1], fd); err != nil {
		t.Fatal(err)
	}
	if err := l.WaitDurable(a.LastOffset + 1); !errors.Is(err, ErrFailed) {
		t.Fatalf("WaitDurable(%d) with the sync failing: %v, want ErrFailed", a.LastOffset+1, err)
	}
	// The device "recovers": later fsyncs of the file succeed.
	if err := unix.Dup2(saved, fd); err != nil {
		t.Fatal(err)
	}
	l.ckMu.Unlock()
	l.waitIdle()
	err = l.WaitDurable(a.LastOffset + 1)
	t.Logf("after the seal: WaitDurable(%d) = %v; recovery point %d", a.LastOffset+1, err, l.RecoveryPoint())
	if err == nil {
		t.Errorf("batch %d..%d acknowledged durable after its fdatasync failed", a.BaseOffset, a.LastOffset)
	}
	if rp := l.RecoveryPoint(); rp > a.BaseOffset {
		t.Errorf("recovery point %d passes batch %d..%d whose fdatasync failed", rp, a.BaseOffset, a.LastOffset)
	}
	ck, err := readCheckpoint(filepath.Join(l.dir, recoveryPointFile))
	if err != nil {
		t.Fatal(err)
	}
	if ck > a.BaseOffset {
		t.Errorf("checkpointed recovery point %d passes batch %d..%d whose fdatasync failed", ck, a.BaseOffset, a.LastOffset)
	}
}

func mustValidate(t *testing.T, raw []byte) batch.Batch {
	t.Helper()
	v, err := batch.Validate(raw, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestZeroIntervalPanics: Open accepted SyncPolicy{Kind:
// SyncInterval} with a zero Interval (only ParseSyncPolicy refused it; an
// embedder builds the struct), and the flusher goroutine then called
// time.NewTicker(0), which panicked and took the whole process down. Open
// refuses it now, and a bytes policy without bytes likewise.
func TestZeroIntervalPanics(t *testing.T) {
	t.Parallel()
	for _, pol := range []SyncPolicy{{Kind: SyncInterval}, {Kind: SyncInterval, Interval: -time.Second}, {Kind: SyncBytes}} {
		opts := smallSegments(1 << 20)
		opts.Sync = pol
		l, err := Open(t.TempDir(), opts)
		if err == nil {
			l.Close()
		}
		if !errors.Is(err, ErrInvalidSyncPolicy) {
			t.Errorf("Open with %+v: %v, want ErrInvalidSyncPolicy", pol, err)
		}
	}
}

// TestDurableVisibilityUnwaitedAppendInvisible: under SyncAlways
// with DurableVisibility the high watermark moves only when a sync ends.
// A batch whose appender does not wait (a Kafka acks=0 producer: the
// kafka package takes AppendNoWait's wait only for acks != 0) is never
// synced by anyone: it stays invisible to every reader, and Advanced's
// waiters asleep, until some other appender happens to wait, a roll
// seals its segment, or the log closes. The seal case was fixed (see
// TestSealDurableNotVisible); a batch that does not roll is left
// behind indefinitely.
func TestDurableVisibilityUnwaitedAppendInvisible(t *testing.T) {
	t.Parallel()
	opts := smallSegments(1 << 20)
	opts.Sync = SyncPolicy{Kind: SyncAlways}
	opts.DurableVisibility = true
	l, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ch := l.Advanced()
	res, wait, err := l.AppendBatch(mustValidate(t, makeBatch(t, 0, 2, 100, 1)), nil)
	if err != nil || !wait {
		t.Fatalf("AppendBatch: wait %v, %v", wait, err)
	}
	select {
	case <-ch:
	case <-time.After(3 * time.Second):
	}
	if hw := l.HighWatermark(); hw <= res.LastOffset {
		t.Errorf("3s after an append nobody waits for, the high watermark is %d: batch %d..%d is still invisible (syncs run: %d)",
			hw, res.BaseOffset, res.LastOffset, l.Syncs())
	}
}
