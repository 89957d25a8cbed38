//go:build linux

package main

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/partition"
	"github.com/idemlog/idemlog/segment"
)

func reviewBatch(t *testing.T, records int) []byte {
	t.Helper()
	b := batch.NewBuilder(batch.CodecNone)
	for i := range records {
		b.Append(1700000000000+int64(i), nil, []byte("value"), nil)
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), out...)
}

// TestReviewVerifyOffsetOverflow: the base offset is not covered by the
// CRC. A batch whose base offset is near MaxInt64 has a last offset that
// overflows to a negative number; verify must reject it (offset too far
// from the segment's base), not pass it with negative offsets.
func TestReviewVerifyOffsetOverflow(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t-0")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b := reviewBatch(t, 5)
	binary.BigEndian.PutUint64(b, math.MaxInt64-1)
	path := filepath.Join(dir, "00000000000000000000.log")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI("verify", path)
	if code != 1 {
		t.Errorf("verify of a batch at offset MaxInt64-1 with 5 records in segment 0: exit %d, want 1\n%s%s", code, stdout, stderr)
	}
}

// TestReviewVerifyFreshActiveSegment: a partition that crashed right after
// a roll or its creation has an empty active segment with a preallocated
// (all-zero) .index. Opening recovers it; verify must accept it as it
// accepts zero tails of logs not closed cleanly.
func TestReviewVerifyFreshActiveSegment(t *testing.T) {
	data := t.TempDir()
	dir := filepath.Join(data, "t-0")
	l, err := partition.Open(dir, partition.Options{Segment: segment.Options{IndexMaxBytes: 4096}})
	if err != nil {
		t.Fatal(err)
	}
	l.Kill()
	idx, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, f := range idx {
		st, _ := os.Stat(f)
		t.Logf("%s %d", f, st.Size())
	}
	// The partition opens fine: it is recoverable.
	l2, err := partition.Open(dir, partition.Options{Segment: segment.Options{IndexMaxBytes: 4096}})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	l2.Kill()
	code, stdout, stderr := runCLI("verify", dir)
	if code != 0 {
		t.Errorf("verify of a fresh, killed partition: exit %d, want 0\n%s%s", code, stdout, stderr)
	}
}

// TestReviewVerifyIndexHeap: verify maps the .log so that segments of any
// size stay off the heap, but reads the whole .index into memory: a large
// (here sparse, 1 GiB) index beside a one-batch segment costs its full
// size in heap.
func TestReviewVerifyIndexHeap(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t-0")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "00000000000000000000.log"), reviewBatch(t, 3), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "00000000000000000000.index"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	code, stdout, stderr := runCLI("verify", dir)
	runtime.ReadMemStats(&m1)
	alloc := m1.TotalAlloc - m0.TotalAlloc
	t.Logf("exit %d, %d MiB allocated\n%s%s", code, alloc>>20, stdout, stderr)
	if alloc > 64<<20 {
		t.Errorf("verify allocated %d MiB for a 1 GiB sparse index", alloc>>20)
	}
}
