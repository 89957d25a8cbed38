package partition

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/idemlog/idemlog/errcode"
	"github.com/idemlog/idemlog/segment"
)

// mountTmpfs mounts a small tmpfs for the test. The test machines run tests
// as root; a refused mount fails the test rather than skipping it, because
// the disk-full path must be exercised for real.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Fatalf("cannot mount a %s tmpfs at %s (tests need root for the disk-full check): %v", size, dir, err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

func TestDiskFull(t *testing.T) {
	t.Parallel()
	root := mountTmpfs(t, "1m")
	filler := filepath.Join(root, "filler")
	if err := os.WriteFile(filler, make([]byte, 256<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "topic-0")
	opts := Options{Segment: segment.Options{MaxBytes: 128 << 10, IndexMaxBytes: 4 << 10, IndexIntervalBytes: 1024, ReserveAhead: 16 << 10}}
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	var sent [][]byte
	var full error
	// Fill the disk. The maintainer frees space in the background (trims of
	// sealed segments, discarded spares), so the disk counts as full only
	// when an append fails with the maintainer idle before it: then nothing
	// runs that could free space, and the next append must fail too.
	for i := 0; i < 10000; i++ {
		l.waitIdle()
		b := makeBatch(t, i, 2, 1000, int64(i))
		if _, err := l.Append(b); err != nil {
			full = err
			break
		}
		sent = append(sent, b)
	}
	if full == nil {
		t.Fatal("a 1 MiB tmpfs never filled up")
	}
	if !errors.Is(full, segment.ErrNoSpace) || errcode.Code(full) != errcode.KafkaStorageError {
		t.Fatalf("disk full gave %v (code %d), want ErrNoSpace / KAFKA_STORAGE_ERROR", full, errcode.Code(full))
	}
	t.Logf("after %d batches: %v", len(sent), full)
	leo := l.LogEndOffset()
	// Still readable, unchanged, and still refusing while the disk is full.
	checkSent := func(l *Log) {
		got := readAll(t, l)
		if len(got) != len(sent) {
			t.Fatalf("%d batches readable, %d acknowledged", len(got), len(sent))
		}
		var base int64
		for i := range got {
			sameBatch(t, got[i], sent[i], base)
			base = got[i].NextOffset()
		}
	}
	checkSent(l)
	l.waitIdle()
	if _, err := l.Append(makeBatch(t, 1, 2, 1000, 1)); !errors.Is(err, segment.ErrNoSpace) {
		t.Fatalf("second append on a full disk: %v", err)
	}
	if l.LogEndOffset() != leo {
		t.Fatal("failed appends moved the log end")
	}
	// Space returns: appends succeed again.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	b := makeBatch(t, 20000, 2, 1000, 1)
	res, err := l.Append(b)
	if err != nil {
		t.Fatalf("append after space returned: %v", err)
	}
	if res.BaseOffset != leo {
		t.Fatalf("append after space returned at %d, want %d", res.BaseOffset, leo)
	}
	sent = append(sent, b)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	checkSent(l)
}
