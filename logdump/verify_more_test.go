//go:build linux

package logdump

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/internal/enginekill"
	"github.com/idemlog/idemlog/partition"
	"github.com/idemlog/idemlog/segment"
	"github.com/idemlog/idemlog/txnindex"
)

// verifyTestEngine writes topic t (one partition) through the engine: an
// idempotent producer and a transactional one whose transactions alternate
// commit and abort, every codec in turn, null keys and headers. It closes
// the engine cleanly, or kills it (a crash) with kill. It returns the data
// directory.
func verifyTestEngine(t *testing.T, kill bool) string {
	t.Helper()
	dir := t.TempDir()
	e, err := engine.Open(dir, engine.Options{MaintainInterval: -1, Partition: partition.Options{
		Segment: segment.Options{MaxBytes: 4096, IndexIntervalBytes: 256, IndexMaxBytes: 4096}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	p, err := e.Partition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	pr, err := e.NewProducer()
	if err != nil {
		t.Fatal(err)
	}
	tp, err := e.NewTransactionalProducer("tx", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	codecs := []batch.Codec{batch.CodecNone, batch.CodecGzip, batch.CodecSnappy, batch.CodecLZ4, batch.CodecZstd}
	for i := range 20 {
		b := batch.NewBuilder(codecs[i%len(codecs)])
		b.Append(1700000000000+int64(i), nil, fmt.Appendf(nil, "v%d", i), []batch.Header{{Key: []byte("h")}})
		b.Append(1700000000001+int64(i), []byte("k"), bytes.Repeat([]byte("x"), 100), nil)
		if i%2 == 0 {
			if _, err := pr.Send(p, b); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if _, err := tp.Send(p, b); err != nil {
			t.Fatal(err)
		}
		if i%4 == 1 {
			err = tp.Commit()
		} else {
			err = tp.Abort()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if kill {
		enginekill.Kill(e)
	} else if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// verifyTestBatches returns the position and bytes of each valid batch of a
// .log file, stopping at the first thing that is not one (a zero tail).
func verifyTestBatches(t *testing.T, path string) (data []byte, pos []int, bs []batch.Batch) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for it := batch.NewIter(data); it.Next(); {
		b, err := batch.Validate(it.Batch(), 0)
		if err != nil {
			break
		}
		pos, bs = append(pos, it.Pos()), append(bs, b)
	}
	return data, pos, bs
}

// TestVerifyTxnIndexOnCommitMarker: an aborted-transaction index
// entry must end at an ABORT marker of its producer (segment.VerifyFile's
// own message says "no abort marker of that producer"). One that points at
// a COMMIT marker makes read_committed consumers drop a committed
// transaction; verify passes it.
func TestVerifyTxnIndexOnCommitMarker(t *testing.T) {
	t.Parallel()
	data := verifyTestEngine(t, false)
	// Every segment has a .txnindex; one holds the aborted transaction.
	all, _ := filepath.Glob(filepath.Join(data, "t-0", "*.txnindex"))
	var txns []string
	for _, f := range all {
		if st, err := os.Stat(f); err == nil && st.Size() > 0 {
			txns = append(txns, f)
		}
	}
	if len(txns) != 1 {
		t.Fatalf("want one non-empty .txnindex, got %q of %q", txns, all)
	}
	logPath := strings.TrimSuffix(txns[0], ".txnindex") + ".log"
	_, _, bs := verifyTestBatches(t, logPath)
	var commit batch.Batch
	for _, b := range bs {
		if c, err := b.Control(); b.IsControl() && err == nil && c.Type == batch.ControlCommit {
			commit = b
			break
		}
	}
	if commit == nil {
		t.Fatal("no COMMIT marker in the segment")
	}
	e := txnindex.Entry{ProducerID: commit.ProducerID(), FirstOffset: commit.BaseOffset(),
		LastOffset: commit.BaseOffset(), LastStableOffset: commit.BaseOffset() + 1}
	buf := make([]byte, txnindex.EntrySize)
	e.Put(buf)
	if err := os.WriteFile(txns[0], buf, 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := Verify(&out, data, VerifyOptions{}); !errors.Is(err, segment.ErrVerify) {
		t.Fatalf("verify with a .txnindex entry ending at the COMMIT marker at offset %d: err %v, want ErrVerify\n%s",
			commit.BaseOffset(), err, out.String())
	}
}

// TestVerifyOpensNothingForWriting: verify must only read the
// directory it checks ("without changing anything"). It opens each
// .txnindex read-write (txnindex.Open), so it fails on a read-only copy
// of a partition (a backup, a read-only mount, a 0444 file for a
// non-root user), and inotify sees the file closed after a write open.
func TestVerifyOpensNothingForWriting(t *testing.T) {
	t.Parallel()
	data := verifyTestEngine(t, false)
	part := filepath.Join(data, "t-0")
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	const mask = unix.IN_CLOSE_WRITE | unix.IN_MODIFY | unix.IN_CREATE |
		unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO
	if _, err := unix.InotifyAddWatch(fd, part, mask); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := Verify(&out, data, VerifyOptions{}); err != nil {
		t.Fatalf("verify: %v\n%s", err, out.String())
	}
	buf := make([]byte, 64<<10)
	n, err := unix.Read(fd, buf)
	if err != nil && !errors.Is(err, unix.EAGAIN) {
		t.Fatal(err)
	}
	var events []string
	for off := 0; off+unix.SizeofInotifyEvent <= n; {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
		name := string(bytes.TrimRight(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)], "\x00"))
		events = append(events, fmt.Sprintf("%s mask %#x", name, ev.Mask))
		off += unix.SizeofInotifyEvent + int(ev.Len)
	}
	if len(events) > 0 {
		t.Fatalf("verify opened files of %s for writing or changed them (IN_CLOSE_WRITE is %#x): %v",
			part, unix.IN_CLOSE_WRITE, events)
	}
}

// TestVerifyGapInCrashedActiveSegment: in a log not closed
// cleanly, recovery takes a batch that does not start at the offset after
// the previous one as the end of the data (segment.Recover; FORMAT.md) and
// cuts it and everything after. verify, which accepts that log's zero tail
// only because "opening the partition recovers" it, passes the gap as a
// compaction gap: exit 0 for a directory whose open then drops a batch.
func TestVerifyGapInCrashedActiveSegment(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "t-0")
	opts := partition.Options{Segment: segment.Options{MaxBytes: 1 << 20, IndexIntervalBytes: 1 << 20}}
	l, err := partition.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	b := batch.NewBuilder(batch.CodecNone)
	for i := range 5 {
		b.Reset(batch.CodecNone)
		b.Append(int64(i+1)*1000, nil, []byte("value"), nil)
		b.Append(int64(i+1)*1000, nil, []byte("value"), nil)
		out, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(out); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	l.Kill()
	active := filepath.Join(dir, "00000000000000000000.log")
	raw, pos, bs := verifyTestBatches(t, active)
	if len(bs) != 5 {
		t.Fatalf("want 5 batches in %s, got %d", active, len(bs))
	}
	// The base offset is outside the CRC: a torn or never-stamped base.
	lastBase := bs[len(bs)-1].BaseOffset()
	binary.BigEndian.PutUint64(raw[pos[len(pos)-1]:], uint64(lastBase+2))
	if err := os.WriteFile(active, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	_, verr := Verify(&out, dir, VerifyOptions{})
	report := out.String()

	l, err = partition.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	end := l.LogEndOffset()
	l.Kill()
	if verr == nil {
		t.Fatalf("verify passed a crashed log whose last batch starts at %d, after a gap (offsets %d..%d missing); opening it then cut the log end to %d\n%s",
			lastBase+2, lastBase, lastBase+1, end, report)
	}
}

// verifyTimePartition writes batches whose timestamps rise by 1000 with
// an index entry every batch or so, and closes the log cleanly.
func verifyTimePartition(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "t-0")
	l, err := partition.Open(dir, partition.Options{Segment: segment.Options{IndexIntervalBytes: 64, IndexMaxBytes: 4096}})
	if err != nil {
		t.Fatal(err)
	}
	b := batch.NewBuilder(batch.CodecNone)
	for i := range 10 {
		b.Reset(batch.CodecNone)
		b.Append(int64(i+1)*1000, nil, bytes.Repeat([]byte("v"), 100), nil)
		out, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(out); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestVerifyTimeIndexTimestamp: a time index entry is {max
// timestamp up to its offset, that offset}. One whose timestamp is below
// the batches' makes a lookup by time start past records it should find
// (Kafka's DumpLogSegments reports it as a timestamp mismatch). verify
// checks the entries' order and offsets but not their timestamps against
// the batches, and passes it.
func TestVerifyTimeIndexTimestamp(t *testing.T) {
	t.Parallel()
	dir := verifyTimePartition(t)
	tix := filepath.Join(dir, "00000000000000000000.timeindex")
	raw, err := os.ReadFile(tix)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) < 3*12 {
		t.Fatalf("want at least 3 time index entries, got %d bytes", len(raw))
	}
	// Entry 2's timestamp one above entry 1's: still strictly rising,
	// but about a second below the max timestamp of the batches it covers.
	prev := int64(binary.BigEndian.Uint64(raw[12:]))
	real := int64(binary.BigEndian.Uint64(raw[24:]))
	binary.BigEndian.PutUint64(raw[24:], uint64(prev+1))
	if err := os.WriteFile(tix, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := Verify(&out, dir, VerifyOptions{}); err == nil {
		t.Fatalf("verify passed a time index entry with timestamp %d where the batches' max timestamp is %d\n%s",
			prev+1, real, out.String())
	}
}

// TestDumpCrashedPartition: dump treats an index's preallocated
// zeros as space, not corruption, and verify accepts the active segment's
// zero tail of a log not closed cleanly. dump of the same .log reports it
// as a batch "smaller than its header" and exits 1: every partition of a
// running or crashed engine dumps as corrupt.
func TestDumpCrashedPartition(t *testing.T) {
	data := verifyTestEngine(t, true)
	part := filepath.Join(data, "t-0")
	var vout bytes.Buffer
	if _, err := Verify(&vout, part, VerifyOptions{}); err != nil {
		t.Fatalf("verify: %v\n%s", err, vout.String())
	}
	var out bytes.Buffer
	if err := DumpPath(&out, part, Options{NoRecords: true}); err != nil {
		t.Fatalf("dump of a partition that verify accepts: %v\n%s", err, out.String())
	}
}
