package logdump

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// TestReviewIndexNegativePosition: an offset index entry holds a file
// position; a negative one (a garbage index) must be reported as a bad
// entry, whichever entry it is.
func TestReviewIndexNegativePosition(t *testing.T) {
	path := filepath.Join(t.TempDir(), "00000000000000000100.index")
	idx := make([]byte, 16)
	binary.BigEndian.PutUint32(idx[0:], 5)
	binary.BigEndian.PutUint32(idx[4:], 0xFFFFFF00) // position -256
	binary.BigEndian.PutUint32(idx[8:], 9)
	binary.BigEndian.PutUint32(idx[12:], 4096)
	if err := os.WriteFile(path, idx, 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := DumpPath(&out, path, Options{})
	if err == nil {
		t.Errorf("dump of an index whose first entry has position -256: no error\n%s", out.String())
	}
}
