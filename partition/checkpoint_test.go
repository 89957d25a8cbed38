package partition

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemlog/idemlog/segment"
)

// The checkpoint is written in version 1 (checksummed) and both versions
// read back; a file whose checksum or layout fails is damaged, offset 0.
func TestCheckpointFormats(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "orders-3")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, recoveryPointFile)
	if err := writeCheckpoint(path, dir, 12345); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), "1\n1\norders 3 12345\n") {
		t.Fatalf("written as %q, want version 1", data)
	}
	flipped := bytes.Replace(data, []byte("12345"), []byte("12346"), 1)
	for _, tc := range []struct {
		name    string
		content string
		offset  int64
		state   checkpointState
	}{
		{"version 1", string(data), 12345, checkpointV1},
		{"version 0 (Kafka's)", "0\n1\norders 3 777\n", 777, checkpointV0},
		{"version 1, value changed under its checksum", string(flipped), 0, checkpointBad},
		{"version 1 without checksum", "1\n1\norders 3 12345\n", 0, checkpointBad},
		{"torn", "0\n1\nord", 0, checkpointBad},
		{"negative", "0\n1\norders 3 -4\n", 0, checkpointBad},
		{"unknown version", "7\n1\norders 3 4\n", 0, checkpointBad},
	} {
		ck := parseCheckpoint([]byte(tc.content))
		if ck.offset != tc.offset || ck.state != tc.state {
			t.Errorf("%s: offset %d, %v; want %d, %v", tc.name, ck.offset, ck.state, tc.offset, tc.state)
		}
	}
	if ck, err := loadCheckpoint(filepath.Join(dir, "missing")); err != nil || ck.state != checkpointMissing || ck.offset != 0 {
		t.Errorf("missing file: %+v, %v", ck, err)
	}
}

// loggedOptions are smallSegments with a logger the test reads.
func loggedOptions(maxBytes int64) (Options, *bytes.Buffer) {
	var buf bytes.Buffer
	opts := smallSegments(maxBytes)
	opts.Logger = slog.New(slog.NewTextHandler(&buf, nil))
	return opts, &buf
}

// After a crash a log start above the log end is possible (DeleteRecords
// past what was synced), so Open trusts a checksummed one there. Kafka's
// unchecked format beside a checksummed recovery point was not written by
// the log: taken at its word it deleted every segment.
func TestUncheckedLogStartBesideCheckedRecoveryPointIgnored(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts, logged := loggedOptions(1 << 10)
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := l.Append(makeBatch(t, i, 2, 100, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	l.Kill()
	if err := os.WriteFile(filepath.Join(dir, logStartFile), []byte("0\n1\nx 0 5000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if start, end := l.LogStartOffset(), l.LogEndOffset(); start != 0 || end != 40 {
		t.Fatalf("log %d..%d, want 0..40", start, end)
	}
	if !strings.Contains(logged.String(), "level=WARN") || !strings.Contains(logged.String(), logStartFile) {
		t.Fatalf("no WARN about %s:\n%s", logStartFile, logged)
	}
}

// A partition last checkpointed in Kafka's format may predate the rule that
// every segment has a .txnindex: its segments without one are trusted (no
// scan) and get an empty one. Once checkpointed in version 1, a missing one
// is a lost file, and the segment is scanned for the owner to rebuild it.
func TestMissingTxnIndexByCheckpointVersion(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts, logged := loggedOptions(1 << 10)
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := l.Append(makeBatch(t, i, 2, 100, 1)); err != nil {
			t.Fatal(err)
		}
	}
	bases := l.SegmentBases()
	if len(bases) < 3 {
		t.Fatalf("%d segments, want 3 or more", len(bases))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, b := range bases {
		if _, err := os.Stat(filepath.Join(dir, segment.FileName(b, ".txnindex"))); err != nil {
			t.Fatalf("segment %d has no .txnindex: %v", b, err)
		}
	}
	removeTxnIndexes := func() {
		for _, b := range bases {
			if err := os.Remove(filepath.Join(dir, segment.FileName(b, ".txnindex"))); err != nil {
				t.Fatal(err)
			}
		}
	}

	// Kafka's format: trusted, recreated, nothing scanned.
	removeTxnIndexes()
	if err := os.WriteFile(filepath.Join(dir, recoveryPointFile), []byte("0\n1\nx 0 40\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, logStartFile), []byte("0\n1\nx 0 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if l, err = Open(dir, opts); err != nil {
		t.Fatal(err)
	}
	if rf := l.RecoveredFrom(); rf != 40 {
		t.Fatalf("version 0 checkpoint: RecoveredFrom %d, want 40 (nothing scanned)", rf)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, b := range bases {
		if _, err := os.Stat(filepath.Join(dir, segment.FileName(b, ".txnindex"))); err != nil {
			t.Fatalf("segment %d's .txnindex not recreated: %v", b, err)
		}
	}

	// Version 1 (what the Close above wrote): the first missing one is
	// where recovery starts.
	if err := os.Remove(filepath.Join(dir, segment.FileName(bases[1], ".txnindex"))); err != nil {
		t.Fatal(err)
	}
	logged.Reset()
	if l, err = Open(dir, opts); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if rf := l.RecoveredFrom(); rf != bases[1] {
		t.Fatalf("version 1 checkpoint: RecoveredFrom %d, want %d (the segment that lost its .txnindex)", rf, bases[1])
	}
	if !strings.Contains(logged.String(), segment.FileName(bases[1], ".txnindex")) {
		t.Fatalf("the missing .txnindex is not logged:\n%s", logged)
	}
}
