package engine

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/idemlog/idemlog/errcode"
	"github.com/idemlog/idemlog/internal/testutil"
)

// plainRecordBatch is a batch of one record, without a producer id.
func plainRecordBatch(t testing.TB, value string) []byte {
	t.Helper()
	return testutil.Batch(t, testutil.BatchSpec{Values: testutil.Strings(value), Timestamp: 1})
}

// partitionDirs lists the data dir's entries that start with prefix.
func partitionDirs(t *testing.T, dir, prefix string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// A creation past MaxPartitions is refused whole, before anything is
// created, with POLICY_VIOLATION and a message naming the limit; the
// engine goes on as before.
func TestCreateTopicPastMaxPartitionsIsRefusedWhole(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e, err := Open(dir, Options{MaxPartitions: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.CreateTopic("a", 6); err != nil {
		t.Fatal(err)
	}
	for _, create := range []func() error{
		func() error { return e.CreateTopic("huge", 5) },
		func() error { return e.Frontend().CreateTopic("huge", 5, nil) },
		func() error { return e.Frontend().AddPartitions("a", 11) },
	} {
		err := create()
		if !errors.Is(err, ErrResourceLimit) || errcode.Code(err) != 44 || !strings.Contains(err.Error(), "MaxPartitions") {
			t.Fatalf("got %v (code %d), want ErrResourceLimit (POLICY_VIOLATION) naming MaxPartitions", err, errcode.Code(err))
		}
	}
	if got := partitionDirs(t, dir, "huge"); len(got) != 0 {
		t.Fatalf("a refused creation left %v", got)
	}
	if got := partitionDirs(t, dir, "a-"); len(got) != 6 {
		t.Fatalf("a refused AddPartitions left %v", got)
	}
	if topics := e.Topics(); len(topics) != 1 || topics["a"] != 6 {
		t.Fatalf("topics after refusals: %v", topics)
	}
	if err := e.CreateTopic("b", 4); err != nil {
		t.Fatalf("a creation within the limit after refusals: %v", err)
	}
	p, err := e.Partition("b", 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Append(plainRecordBatch(t, "x")); err != nil {
		t.Fatal(err)
	}
}

// CreateTopic("huge", 1000000) fails at once and cleanly under the
// default options, and the engine stays usable.
func TestCreateTopicOfAMillionPartitionsFailsCleanly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	err = e.CreateTopic("huge", 1_000_000)
	if !errors.Is(err, ErrResourceLimit) {
		t.Fatalf("CreateTopic(huge, 1000000): %v, want ErrResourceLimit", err)
	}
	for _, prefix := range []string{"huge", createDirPrefix} {
		if got := partitionDirs(t, dir, prefix); len(got) != 0 {
			t.Fatalf("data dir after the refusal: %v", got)
		}
	}
	if err := e.CreateTopic("t", 2); err != nil {
		t.Fatal(err)
	}
	p, err := e.Partition("t", 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Append(plainRecordBatch(t, "x")); err != nil {
		t.Fatal(err)
	}
}

// Environment of the descriptor-exhaustion child.
const (
	fdChildDirEnv = "IDEMLOG_FD_CHILD_DIR"
	fdChildParts  = 300
	fdChildLimit  = 200
)

// TestDescriptorExhaustionChild is the child of
// TestDescriptorExhaustion: it lowers its own RLIMIT_NOFILE to
// fdChildLimit and prints one line per step ("ok <step>" or
// "error <step>: <err>").
func TestDescriptorExhaustionChild(t *testing.T) {
	dir := os.Getenv(fdChildDirEnv)
	if dir == "" {
		t.Skip("child process of TestDescriptorExhaustion")
	}
	out := bufio.NewWriter(os.Stdout)
	say := func(format string, args ...any) {
		fmt.Fprintf(out, format+"\n", args...)
		out.Flush()
	}
	var saved syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &saved); err != nil {
		say("error getrlimit: %v", err)
		return
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: fdChildLimit, Max: saved.Max}); err != nil {
		say("error setrlimit: %v", err)
		return
	}
	// More partitions than descriptors: they were all written by the
	// parent, and the open must not need one each.
	e, err := Open(dir, Options{})
	if err != nil {
		say("error open: %v", err)
		return
	}
	say("ok open")
	// A creation with too few descriptors free is refused before
	// anything is created: most are taken here.
	var held []*os.File
	for {
		n, err := openDescriptors()
		if err != nil || n >= fdChildLimit-20 {
			break
		}
		f, err := os.Open(os.DevNull)
		if err != nil {
			break
		}
		held = append(held, f)
	}
	if err := e.CreateTopic("more", 10); !errors.Is(err, ErrResourceLimit) || !strings.Contains(err.Error(), "RLIMIT_NOFILE") {
		say("error create: %v", err)
		return
	}
	if got := partitionDirs(t, dir, "more"); len(got) != 0 {
		say("error create left %v", got)
		return
	}
	say("ok create refused")
	for _, f := range held {
		f.Close()
	}
	// Appends to one partition after another wake them, each holding
	// descriptors, until there are none: the failing append reports it,
	// nothing panics, and the partitions already written stay writable.
	failedAt := -1
	for i := range fdChildParts {
		p, err := e.Partition("t", i)
		if err != nil {
			say("error partition %d: %v", i, err)
			return
		}
		if _, err := p.Append(plainRecordBatch(t, "v"+strconv.Itoa(i))); err != nil {
			if !errors.Is(err, syscall.EMFILE) {
				say("error append %d: %v", i, err)
				return
			}
			failedAt = i
			break
		}
	}
	if failedAt < 0 {
		say("error no EMFILE with %d partitions under a limit of %d", fdChildParts, fdChildLimit)
		return
	}
	say("ok emfile at %d", failedAt)
	if p, _ := e.Partition("t", 0); p != nil {
		if _, err := p.Append(plainRecordBatch(t, "again")); err != nil {
			say("error append to a woken partition: %v", err)
			return
		}
	}
	// Descriptors return: the partition that failed takes the append.
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &saved); err != nil {
		say("error setrlimit: %v", err)
		return
	}
	p, _ := e.Partition("t", failedAt)
	if _, err := p.Append(plainRecordBatch(t, "v"+strconv.Itoa(failedAt))); err != nil {
		say("error append after descriptors returned: %v", err)
		return
	}
	say("ok recovered")
	if err := e.Close(); err != nil {
		say("error close: %v", err)
		return
	}
	say("ok close %d", failedAt)
}

// An engine whose process runs out of descriptors (RLIMIT_NOFILE lowered
// in a child) opens a data dir with more partitions than descriptors,
// refuses creations it has no descriptors for, reports EMFILE on the
// append that meets it and takes appends again once descriptors return;
// the data dir then opens again with every acknowledged record.
func TestDescriptorExhaustion(t *testing.T) {
	if os.Getenv(fdChildDirEnv) != "" {
		t.Skip("in the child")
	}
	dir := t.TempDir()
	e, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.CreateTopic("t", fdChildParts); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	child := testutil.StartChild(t, "TestDescriptorExhaustionChild", fdChildDirEnv+"="+dir)
	var lines []string
	for l := range child.Lines {
		if strings.HasPrefix(l, "ok ") || strings.HasPrefix(l, "error ") {
			lines = append(lines, l)
		}
	}
	if _, err := child.Wait(); err != nil {
		t.Fatalf("child: %v; said %q", err, lines)
	}
	want := []string{"ok open", "ok create refused", "ok emfile at", "ok recovered", "ok close"}
	if len(lines) != len(want) {
		t.Fatalf("child said %q, want lines starting %q", lines, want)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Fatalf("child line %d: %q, want %q...", i, lines[i], w)
		}
	}
	failedAt, err := strconv.Atoi(strings.TrimPrefix(lines[4], "ok close "))
	if err != nil {
		t.Fatal(err)
	}
	e, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for i := 0; i <= failedAt; i++ {
		p, err := e.Partition("t", i)
		if err != nil {
			t.Fatal(err)
		}
		want := int64(1)
		if i == 0 {
			want = 2
		}
		if got := p.log.HighWatermark(); got != want {
			t.Errorf("partition %d holds %d records, want %d", i, got, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "t-"+strconv.Itoa(failedAt+1), "00000000000000000000.log")); err == nil {
		t.Errorf("partition %d, never appended to, has a segment", failedAt+1)
	}
}

// A creation that would leave less free disk than DiskReserve is refused
// whole, naming the reserve.
func TestCreateTopicPastDiskReserveIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e, err := Open(dir, Options{DiskReserve: 1 << 62})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	err = e.CreateTopic("t", 3)
	if !errors.Is(err, ErrResourceLimit) || !strings.Contains(err.Error(), "DiskReserve") {
		t.Fatalf("got %v, want ErrResourceLimit naming DiskReserve", err)
	}
	if got := partitionDirs(t, dir, "t-"); len(got) != 0 {
		t.Fatalf("a refused creation left %v", got)
	}
}
