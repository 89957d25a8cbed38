package logdump

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/idemlog/idemlog/producer"
	"github.com/idemlog/idemlog/txnindex"
)

// A producer snapshot and an aborted-transaction index are decoded, not
// taken for segments ("unsupported batch magic"), in text and JSON, with
// what their own readers (producer.ParseSnapshot, txnindex.ReadFile) see.
func TestDumpSnapshotAndTxnIndex(t *testing.T) {
	t.Parallel()
	data := verifyTestEngine(t, false)
	pdir := filepath.Join(data, "t-0")
	snaps, _ := filepath.Glob(filepath.Join(pdir, "*.snapshot"))
	var txns []string
	all, _ := filepath.Glob(filepath.Join(pdir, "*.txnindex"))
	for _, f := range all {
		if st, err := os.Stat(f); err == nil && st.Size() > 0 {
			txns = append(txns, f)
		}
	}
	if len(snaps) == 0 || len(txns) == 0 {
		t.Fatalf("want snapshots and a non-empty .txnindex, got %q and %q", snaps, all)
	}
	snap := snaps[len(snaps)-1]
	raw, err := os.ReadFile(snap)
	if err != nil {
		t.Fatal(err)
	}
	producers, err := producer.ParseSnapshot(raw)
	if err != nil || len(producers) == 0 {
		t.Fatalf("snapshot %s: %v, %d producers", snap, err, len(producers))
	}
	base, _ := parseBase(filepath.Base(txns[0]), ".txnindex")
	aborted, err := txnindex.ReadFile(txns[0], base)
	if err != nil || len(aborted) == 0 {
		t.Fatalf("%s: %v, %d entries", txns[0], err, len(aborted))
	}

	for _, tc := range []struct {
		path    string
		entries int
		first   string
	}{
		{snap, len(producers), "producerId: " + strconv.FormatInt(producers[0].ProducerID, 10) + " producerEpoch: "},
		{txns[0], len(aborted), "version: 0 producerId: " + strconv.FormatInt(aborted[0].ProducerID, 10) + " firstOffset: " + strconv.FormatInt(aborted[0].FirstOffset, 10) +
			" lastOffset: " + strconv.FormatInt(aborted[0].LastOffset, 10)},
	} {
		var text bytes.Buffer
		if err := DumpPath(&text, tc.path, Options{}); err != nil {
			t.Fatalf("dump %s: %v", tc.path, err)
		}
		lines := strings.Split(strings.TrimSuffix(text.String(), "\n"), "\n")
		if len(lines) != tc.entries+2 || lines[0] != "Dumping "+tc.path || !strings.HasPrefix(lines[1], tc.first) ||
			!strings.HasPrefix(lines[len(lines)-1], "Summary: ") {
			t.Errorf("text dump of %s:\n%s\nwant %d entry lines, the first starting %q", tc.path, text.String(), tc.entries, tc.first)
		}
		var js bytes.Buffer
		if err := DumpPath(&js, tc.path, Options{JSON: true}); err != nil {
			t.Fatalf("dump --json %s: %v", tc.path, err)
		}
		objs := strings.Split(strings.TrimSuffix(js.String(), "\n"), "\n")
		if len(objs) != tc.entries {
			t.Fatalf("JSON dump of %s: %d lines, want %d:\n%s", tc.path, len(objs), tc.entries, js.String())
		}
		var first map[string]int64
		if err := json.Unmarshal([]byte(objs[0]), &first); err != nil {
			t.Fatalf("JSON dump of %s: %v: %s", tc.path, err, objs[0])
		}
		if tc.path == snap && (first["producerId"] != producers[0].ProducerID || first["lastOffset"] != producers[0].LastOffset) {
			t.Errorf("JSON of the snapshot's first producer: %s, want %+v", objs[0], producers[0])
		}
		if tc.path == txns[0] && (first["producerId"] != aborted[0].ProducerID || first["lastStableOffset"] != aborted[0].LastStableOffset) {
			t.Errorf("JSON of the first aborted transaction: %s, want %+v", objs[0], aborted[0])
		}
	}

	// A damaged snapshot is an error that says why, not a batch error.
	raw[len(raw)-1] ^= 1
	bad := filepath.Join(t.TempDir(), filepath.Base(snap))
	if err := os.WriteFile(bad, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := DumpPath(&out, bad, Options{}); err == nil || !strings.Contains(err.Error(), "crc") || strings.Contains(out.String(), "magic") {
		t.Errorf("damaged snapshot: %v\n%s", err, out.String())
	}
}
