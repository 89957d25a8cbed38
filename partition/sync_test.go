package partition

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/idemlog/idemlog/segment"
	"golang.org/x/sys/unix"
	"runtime"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
)

// TestSyncMissesSegmentRolledDuringSnapshot: syncOnce reads the
// unsealed list and then the active pointer, while a roll writes them in the
// same order (list, then pointer). A roll that lands between the two reads
// leaves the old active segment in neither: the sync never fdatasyncs it,
// yet reports the end offset E (read before the roll, covering that
// segment's bytes) durable, moves the recovery point to E and, under
// DurableVisibility, raises the high watermark to E while the segment's
// tail is not published. The interleaving is forced with sync.Mutex's
// starvation handoff on unsealedMu under GOMAXPROCS(1).
func TestSyncMissesSegmentRolledDuringSnapshot(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	raw := func(id int) []byte { return makeBatch(t, id, 2, 200, 1) }
	n := int64(len(raw(0)))
	opts := smallSegments(2*n + 10)
	opts.Sync = SyncPolicy{Kind: SyncAlways}
	opts.DurableVisibility = true
	l, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.abandon()
	if _, err := l.Append(raw(0)); err != nil { // A: durable, visible
		t.Fatal(err)
	}
	b := appendNoWait(t, l, raw(1)) // B: written into S, not yet synced
	s := l.active
	l.maint.drop.Store(true) // the maintainer has not sealed S yet (as if slow)

	type res struct {
		end int64
		err error
	}
	leader := make(chan res, 1)
	roller := make(chan error, 1)

	l.unsealedMu.Lock()
	go func() { // the group sync's leader
		end, err := l.syncOnce()
		leader <- res{end, err}
	}()
	time.Sleep(3 * time.Millisecond) // leader: E read, blocked on unsealedMu
	go func() {                      // an appender whose batch rolls S
		v, err := batch.Validate(raw(2), 1<<20)
		if err == nil {
			_, _, err = l.AppendBatch(v, nil)
		}
		roller <- err
	}()
	time.Sleep(3 * time.Millisecond) // roller: in roll, holding mu, blocked on unsealedMu
	// Put unsealedMu into starvation mode, so each Unlock hands it to the
	// next waiter and yields: the leader copies the list and hands the
	// lock to the roller, which completes the roll before the leader
	// loads the active pointer.
	l.unsealedMu.Unlock()
	l.unsealedMu.Lock()
	time.Sleep(3 * time.Millisecond)
	l.unsealedMu.Unlock()

	r := <-leader
	if err := <-roller; err != nil {
		t.Fatal(err)
	}
	if r.err != nil {
		t.Fatalf("sync: %v", r.err)
	}
	if l.active == s {
		t.Fatal("no roll happened")
	}
	t.Logf("sync end %d, B %d..%d, hw %d, recovery point %d, S published %d of %d",
		r.end, b.BaseOffset, b.LastOffset, l.HighWatermark(), l.RecoveryPoint(), s.Published(), s.Size())
	if r.end > b.LastOffset && s.Published() < s.Size() {
		t.Errorf("sync reported offsets below %d durable (recovery point %d, high watermark %d) but never synced segment %d holding B at %d..%d: its published size is %d of %d",
			r.end, l.RecoveryPoint(), l.HighWatermark(), s.Base(), b.BaseOffset, b.LastOffset, s.Published(), s.Size())
	}
	if c, err := l.Read(b.BaseOffset, 1<<20); err != nil {
		t.Errorf("Read(%d) below high watermark %d: %v", b.BaseOffset, l.HighWatermark(), err)
	} else {
		if bb := batch.Batch(c.Data); bb.BaseOffset() != b.BaseOffset {
			t.Errorf("Read(%d) returned batch at %d", b.BaseOffset, bb.BaseOffset())
		}
		c.Release()
	}
}

// segmentFD finds the read-write descriptor of the segment's .log (the
// segment keeps it private).
func segmentFD(t *testing.T, l *Log, base int64) int {
	t.Helper()
	want := filepath.Join(l.dir, segment.FileName(base, ".log"))
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil || target != want {
			continue
		}
		info, err := os.ReadFile("/proc/self/fdinfo/" + e.Name())
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(info), "\n") {
			if f, ok := strings.CutPrefix(line, "flags:"); ok {
				flags, _ := strconv.ParseInt(strings.TrimSpace(f), 8, 64)
				if flags&unix.O_ACCMODE == unix.O_RDWR {
					fd, _ := strconv.Atoi(e.Name())
					return fd
				}
			}
		}
	}
	t.Fatalf("no read-write descriptor of %s", want)
	return -1
}

// TestSyncAcksSegmentWhoseSealFailed: the failed check in
// startStaging (and in syncOnce for the other policies) runs before the
// unsealed list is copied, and sealRolled takes a segment off that list
// before it marks the log failed. A seal that fails between the two lets
// a group sync copy a list without the segment and count its bytes
// durable: the appender waiting for a batch in that segment is
// acknowledged though no fsync of it ever succeeded. The seal failure is
// injected by swapping the segment's descriptor for a read-only one of the
// same file (its ftruncate then fails, as an I/O error would fail it).
func TestSyncAcksSegmentWhoseSealFailed(t *testing.T) {
	t.Parallel()
	raw := func(id int) []byte { return makeBatch(t, id, 2, 200, 1) }
	n := int64(len(raw(0)))
	opts := smallSegments(n + 10) // one batch per segment
	opts.Sync = SyncPolicy{Kind: SyncAlways}
	l, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.abandon()
	if _, err := l.Append(raw(0)); err != nil {
		t.Fatal(err)
	}
	// Stall the maintainer in the first seal's checkpoint write.
	l.ckMu.Lock()
	a := appendNoWait(t, l, raw(1)) // rolls S0 -> S1; A in S1, not synced
	s1 := l.active
	ro, err := os.Open(filepath.Join(l.dir, segment.FileName(s1.Base(), ".log")))
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if err := unix.Dup2(int(ro.Fd()), segmentFD(t, l, s1.Base())); err != nil {
		t.Fatal(err)
	}
	appendNoWait(t, l, raw(2)) // rolls S1 -> S2; S1's seal is queued
	if l.active == s1 {
		t.Fatal("no roll")
	}
	waitWaiters(t, &l.ckMu, 1) // maintainer: S0 sealed and off the list, waits for ckMu
	l.unsealedMu.Lock()
	l.ckMu.Unlock()
	waitWaiters(t, &l.unsealedMu, 1) // maintainer: S1's seal failed, waits for unsealedMu
	if l.failed.Load() {
		t.Log("log already failed when the leader starts")
	}
	acked := make(chan error, 1)
	go func() { acked <- l.WaitDurable(a.LastOffset + 1) }() // A's appender
	// leader: past startStaging, waits for unsealedMu (a log that refuses
	// the sync at its start answers at once instead)
	for state := (*int32)(unsafe.Pointer(&l.unsealedMu)); atomic.LoadInt32(state)>>3 < 2 && len(acked) == 0; {
		time.Sleep(100 * time.Microsecond)
	}
	l.unsealedMu.Unlock()
	err = <-acked
	t.Logf("WaitDurable(%d): %v; log failed: %v", a.LastOffset+1, err, l.failed.Load())
	if err == nil {
		t.Errorf("batch %d..%d in segment %d acknowledged durable, but that segment's seal (its only fsync) failed",
			a.BaseOffset, a.LastOffset, s1.Base())
	}
}

// waitWaiters waits until n goroutines are queued on mu (sync.Mutex keeps
// its waiter count in the state word's bits above the low three).
func waitWaiters(t *testing.T, mu *sync.Mutex, n int32) {
	t.Helper()
	state := (*int32)(unsafe.Pointer(mu))
	for deadline := time.Now().Add(5 * time.Second); atomic.LoadInt32(state)>>3 < n; {
		if time.Now().After(deadline) {
			t.Errorf("timed out waiting for %d waiters on a mutex", n)
			return
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// TestSealDurableNotVisible: under DurableVisibility the high
// watermark is the durable end. A rolled segment's seal makes its bytes
// durable and publishes them and sealRolled advances the group sync's
// durable mark (so a waiter for them returns, acknowledged), but nothing
// raises the high watermark: an acknowledged batch stays invisible (and
// Advanced waiters asleep) until some later sync, which never comes if
// the batch that rolled was not waited for (acks=0) and nothing else is
// appended.
func TestSealDurableNotVisible(t *testing.T) {
	t.Parallel()
	raw := func(id int) []byte { return makeBatch(t, id, 2, 200, 1) }
	n := int64(len(raw(0)))
	opts := smallSegments(n + 10) // one batch per segment
	opts.Sync = SyncPolicy{Kind: SyncAlways}
	opts.DurableVisibility = true
	l, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a := appendNoWait(t, l, raw(0)) // acks=all producer
	ch := l.Advanced()
	appendNoWait(t, l, raw(1)) // acks=0 producer: rolls, never waits
	l.waitIdle()               // the seal of A's segment
	if err := l.WaitDurable(a.LastOffset + 1); err != nil {
		t.Fatal(err)
	}
	// A is acknowledged as durable.
	if hw := l.HighWatermark(); hw <= a.LastOffset {
		t.Errorf("batch %d..%d acknowledged durable, but the high watermark is %d (recovery point %d)", a.BaseOffset, a.LastOffset, hw, l.RecoveryPoint())
	}
	select {
	case <-ch:
	default:
		t.Error("Advanced waiter not woken although an acknowledged batch became durable")
	}
}
