//go:build linux

package logdump

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/segment"
	"github.com/idemlog/idemlog/txnindex"
)

// compactedPartition writes an idemlog partition directory t-0 (its
// checkpoints in it, closed cleanly unless crashed) whose topic.config
// sets cleanup.policy: segment 0 is compactedSegment0 (ends at 10), the
// segment at 20 is active with offsets 20..21; 10..19 were cleaned away.
func compactedPartition(t *testing.T, policy string, crashed bool) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "t-0")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "00000000000000000000.log"), compactedSegment0(t))
	writeFile(t, filepath.Join(dir, "00000000000000000020.log"), denseSegment(t, 20, 22))
	writeFile(t, filepath.Join(dir, "recovery-point-offset-checkpoint"), []byte("0\n1\nt 0 22\n"))
	writeFile(t, filepath.Join(dir, "log-start-offset-checkpoint"), []byte("0\n1\nt 0 0\n"))
	writeTopicConfig(t, dir, "cleanup.policy="+policy+"\n")
	if !crashed {
		writeFile(t, filepath.Join(dir, cleanShutdownFile), nil)
	}
	return dir
}

// writeTopicConfig writes the engine's topic.config: its checksum header,
// then the lines.
func writeTopicConfig(t *testing.T, dir, lines string) {
	t.Helper()
	sum := crc32.Checksum([]byte(lines), crc32.MakeTable(crc32.Castagnoli))
	writeFile(t, filepath.Join(dir, "topic.config"), fmt.Appendf(nil, "%s%08x\n%s", topicConfigHeader, sum, lines))
}

// TestVerifyCompactedPartition: in a compacted topic's partition, gaps
// between batches, before a segment's first batch and between segments
// are what cleaning leaves, and an emptied batch is a valid one: verify
// passes and counts the skipped offsets. The same files in a topic that is
// not compacted fail: there a gap is lost data.
func TestVerifyCompactedPartition(t *testing.T) {
	for _, policy := range []string{"compact", "compact,delete"} {
		var out bytes.Buffer
		sum, err := Verify(&out, compactedPartition(t, policy, false), VerifyOptions{})
		if err != nil {
			t.Fatalf("cleanup.policy=%s: %v\n%s", policy, err, out.String())
		}
		if sum.Skipped != 14 || sum.Batches != 5 || sum.Repairable != 0 {
			t.Errorf("cleanup.policy=%s: %+v, want 14 offsets skipped in 5 batches\n%s", policy, sum, out.String())
		}
		if !strings.Contains(out.String(), "compacted topic") {
			t.Errorf("cleanup.policy=%s: report does not say the topic is compacted\n%s", policy, out.String())
		}
	}
	var out bytes.Buffer
	if _, err := Verify(&out, compactedPartition(t, "delete", false), VerifyOptions{}); !errors.Is(err, segment.ErrVerify) {
		t.Fatalf("the gap between segments of a topic that is not compacted: %v, want ErrVerify\n%s", err, out.String())
	}
}

// TestVerifyCompactedActiveSegmentGap: the active segment is never
// cleaned, so in a crashed log a gap there is still what recovery cuts
// at, compacted topic or not.
func TestVerifyCompactedActiveSegmentGap(t *testing.T) {
	dir := compactedPartition(t, "compact", true)
	var out bytes.Buffer
	if _, err := Verify(&out, dir, VerifyOptions{}); err != nil {
		t.Fatalf("crashed compacted partition without a gap in its active segment: %v\n%s", err, out.String())
	}
	writeFile(t, filepath.Join(dir, "00000000000000000020.log"), append(denseSegment(t, 20, 21), denseSegment(t, 22, 23)...))
	out.Reset()
	if _, err := Verify(&out, dir, VerifyOptions{}); !errors.Is(err, segment.ErrVerify) {
		t.Fatalf("gap in the active segment of a crashed log: %v, want ErrVerify\n%s", err, out.String())
	}
}

// TestVerifyCompactedOverlap: gaps are normal in a compacted log,
// overlaps never: a batch at or below the end of the one before, in a
// segment or across two, is corruption.
func TestVerifyCompactedOverlap(t *testing.T) {
	dir := compactedPartition(t, "compact", false)
	seg0 := filepath.Join(dir, "00000000000000000000.log")
	good := compactedSegment0(t)
	writeFile(t, seg0, append(bytes.Clone(good), cleanedBatch{base: 8, lastDelta: 1, pid: -1, epoch: -1, seq: -1, horizon: -1, maxTs: 1}.bytes()...))
	var out bytes.Buffer
	if _, err := Verify(&out, dir, VerifyOptions{}); !errors.Is(err, segment.ErrVerify) || !strings.Contains(err.Error(), "not above previous") {
		t.Fatalf("batch 8..9 after one ending at 9: %v, want ErrVerify (not above previous)\n%s", err, out.String())
	}
	writeFile(t, seg0, good)
	writeFile(t, filepath.Join(dir, "00000000000000000008.log"), denseSegment(t, 8, 9))
	out.Reset()
	if _, err := Verify(&out, dir, VerifyOptions{}); !errors.Is(err, segment.ErrVerify) || !strings.Contains(err.Error(), "overlaps") {
		t.Fatalf("segment 8 below the end 10 of segment 0: %v, want ErrVerify (overlaps)\n%s", err, out.String())
	}
}

// batchPositions returns the file position of each batch of seg.
func batchPositions(t *testing.T, seg []byte) []int {
	t.Helper()
	var pos []int
	for p := 0; p < len(seg); {
		n, err := batch.Size(seg[p:])
		if err != nil {
			t.Fatal(err)
		}
		pos = append(pos, p)
		p += n
	}
	return pos
}

// TestVerifyCompactedIndexes: the cleaner's offset and time indexes of a
// segment with gaps and an emptied batch (entries at the batches that
// survived, the emptied one included) pass; an entry that names an offset
// in a gap, inside no batch, fails.
func TestVerifyCompactedIndexes(t *testing.T) {
	dir := compactedPartition(t, "compact", false)
	pos := batchPositions(t, compactedSegment0(t))
	index := func(entries ...[2]int64) []byte {
		var b []byte
		for _, e := range entries {
			b = binary.BigEndian.AppendUint32(b, uint32(e[0]))
			b = binary.BigEndian.AppendUint32(b, uint32(e[1]))
		}
		return b
	}
	var tix []byte
	for _, e := range [][2]int64{{1006, 6}, {1009, 9}} { // the running max, at the last offset of its batch
		tix = binary.BigEndian.AppendUint64(tix, uint64(e[0]))
		tix = binary.BigEndian.AppendUint32(tix, uint32(e[1]))
	}
	writeFile(t, filepath.Join(dir, "00000000000000000000.index"), index([2]int64{6, int64(pos[1])}, [2]int64{9, int64(pos[2])}))
	writeFile(t, filepath.Join(dir, "00000000000000000000.timeindex"), tix)
	var out bytes.Buffer
	if _, err := Verify(&out, dir, VerifyOptions{}); err != nil {
		t.Fatalf("indexes of a cleaned segment: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "index 2 entries, timeindex 2 entries") {
		t.Errorf("the indexes were not checked:\n%s", out.String())
	}
	// Offset 4 lies in the gap before the batch at 5.
	writeFile(t, filepath.Join(dir, "00000000000000000000.index"), index([2]int64{4, int64(pos[1])}))
	out.Reset()
	if _, err := Verify(&out, dir, VerifyOptions{}); !errors.Is(err, segment.ErrIndexMismatch) {
		t.Fatalf("index entry at offset 4, in a gap: %v, want ErrIndexMismatch\n%s", err, out.String())
	}
}

// TestVerifyCompactedTxnIndex: cleaning removes an aborted transaction's
// data and keeps its ABORT marker while the index still lists it: the
// entry's first offset lies in a gap, which is fine; its marker must
// still be there.
func TestVerifyCompactedTxnIndex(t *testing.T) {
	dir := compactedPartition(t, "compact", false)
	seg := denseSegment(t, 0, 1)
	// Producer 9's aborted batches at 1..3 are gone; its marker is at 4.
	marker := batch.AppendMarker(nil, batch.Marker{Type: batch.ControlAbort, ProducerID: 9, CoordinatorEpoch: 1, Timestamp: 1004})
	batch.Batch(marker).SetBaseOffset(4)
	seg = append(seg, marker...)
	seg = append(seg, denseSegment(t, 6, 10)...) // 5 is gone too
	writeFile(t, filepath.Join(dir, "00000000000000000000.log"), seg)
	entry := make([]byte, txnindex.EntrySize)
	txnindex.Entry{ProducerID: 9, FirstOffset: 1, LastOffset: 4, LastStableOffset: 1}.Put(entry)
	writeFile(t, filepath.Join(dir, "00000000000000000000.txnindex"), entry)
	var out bytes.Buffer
	if _, err := Verify(&out, dir, VerifyOptions{}); err != nil {
		t.Fatalf("aborted transaction whose data was cleaned: %v\n%s", err, out.String())
	}
	// Without its marker, the entry is corruption still.
	writeFile(t, filepath.Join(dir, "00000000000000000000.log"), append(denseSegment(t, 0, 1), denseSegment(t, 6, 10)...))
	out.Reset()
	if _, err := Verify(&out, dir, VerifyOptions{}); !errors.Is(err, segment.ErrVerify) {
		t.Fatalf("entry whose ABORT marker is gone: %v, want ErrVerify\n%s", err, out.String())
	}
}

// cleanedOver writes, beside a partition of segments 0 (0..9) and 10
// (10..19), the cleaned segment that replaces both, with its offset index,
// named <0>.<kind><suffix>.
func cleanedOver(t *testing.T, suffix string) (dir string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "t-0")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "00000000000000000000.log"), denseSegment(t, 0, 10))
	writeFile(t, filepath.Join(dir, "00000000000000000010.log"), denseSegment(t, 10, 20))
	writeFile(t, filepath.Join(dir, "00000000000000000020.log"), denseSegment(t, 20, 22))
	cleaned := append(compactedSegment0(t), denseSegment(t, 19, 20)...)
	writeFile(t, filepath.Join(dir, "00000000000000000000.log"+suffix), cleaned)
	writeFile(t, filepath.Join(dir, "00000000000000000000.index"+suffix), nil)
	writeFile(t, filepath.Join(dir, "recovery-point-offset-checkpoint"), []byte("0\n1\nt 0 22\n"))
	writeFile(t, filepath.Join(dir, "log-start-offset-checkpoint"), []byte("0\n1\nt 0 0\n"))
	writeTopicConfig(t, dir, "cleanup.policy=compact\n")
	writeFile(t, filepath.Join(dir, cleanShutdownFile), nil)
	return dir
}

// TestVerifyCleaningLeftovers: what a crash leaves in the middle of a
// cleaning's swap (Kafka's .cleaned, .swap and .deleted files) is a crash
// image the next open repairs, not corruption: .cleaned files are
// abandoned (the old segments are checked), a complete .swap replaces
// the segments in its offsets (and is checked as the segment it becomes),
// a .swap at or above a .cleaned one is abandoned too, .deleted files are
// a note. A damaged .swap, which the next open would put in place, is
// corruption.
func TestVerifyCleaningLeftovers(t *testing.T) {
	for _, c := range []struct {
		name       string
		setup      func(t *testing.T) string
		batches    int64
		skipped    int64
		repairable int
		notes      int
		says       string
	}{
		{"cleaned", func(t *testing.T) string { return cleanedOver(t, ".cleaned") }, 22, 0, 1, 0, "did not finish"},
		{"swap", func(t *testing.T) string { return cleanedOver(t, ".swap") }, 6, 13, 1, 0, "swap the next open completes"},
		{"swap and old segments deleted", func(t *testing.T) string {
			dir := cleanedOver(t, ".swap")
			for _, n := range []string{"00000000000000000000.log", "00000000000000000010.log"} {
				if err := os.Rename(filepath.Join(dir, n), filepath.Join(dir, n+".deleted")); err != nil {
					t.Fatal(err)
				}
			}
			return dir
		}, 6, 13, 1, 2, "swap the next open completes"},
		{"swap beside cleaned", func(t *testing.T) string {
			dir := cleanedOver(t, ".swap")
			writeFile(t, filepath.Join(dir, "00000000000000000000.timeindex.cleaned"), nil)
			return dir
		}, 22, 0, 1, 0, "swap did not begin"},
		{"deleted only", func(t *testing.T) string {
			dir := cleanedOver(t, ".deleted")
			return dir
		}, 22, 0, 0, 2, "awaiting deletion"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			sum, err := Verify(&out, c.setup(t), VerifyOptions{})
			if err != nil {
				t.Fatalf("%v\n%s", err, out.String())
			}
			if sum.Batches != c.batches || sum.Skipped != c.skipped || sum.Repairable != c.repairable || sum.Notes != c.notes {
				t.Errorf("%+v: want %d batches, %d skipped, %d repairable, %d notes\n%s", sum, c.batches, c.skipped, c.repairable, c.notes, out.String())
			}
			if !strings.Contains(out.String(), c.says) {
				t.Errorf("report does not say %q:\n%s", c.says, out.String())
			}
		})
	}
	dir := cleanedOver(t, ".swap")
	swap := filepath.Join(dir, "00000000000000000000.log.swap")
	data, err := os.ReadFile(swap)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-3] ^= 1
	writeFile(t, swap, data)
	var out bytes.Buffer
	if _, err := Verify(&out, dir, VerifyOptions{}); !errors.Is(err, segment.ErrVerify) && !errors.Is(err, batch.ErrCRC) {
		t.Fatalf("damaged .swap: %v, want corruption\n%s", err, out.String())
	}
}
