package partition

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/idemlog/idemlog/internal/fsutil"
)

// The checkpoint files (recovery point, log start) have two formats:
//
//	version 0, Kafka's:  "0\n1\n<topic> <partition> <offset>\n"
//	version 1, idemlog's: "1\n1\n<topic> <partition> <offset>\n<crc32c>\n"
//
// where <crc32c> is the CRC-32C (Castagnoli) of the three lines before it,
// in 8 lower-case hex digits. Version 1 is what this code writes; version 0
// is read for partition directories written before it. The checksum tells a
// value that was written from one that is garbage: a torn or damaged log
// start is no reason to delete segments, and a recovery point known to be
// good tells recovery which data was durable before the crash (data lost
// below it is damage, not an unsynced tail).

// maxCheckpointFile bounds what is read of a checkpoint file: a topic name
// is at most 249 bytes, and anything longer is not a checkpoint.
const maxCheckpointFile = 4096

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checkpointState says what a checkpoint file held.
type checkpointState int

const (
	checkpointMissing checkpointState = iota // no file: offset 0
	checkpointV0                             // Kafka's format, no checksum: trusted as before
	checkpointV1                             // idemlog's format, checksum good
	checkpointBad                            // unreadable or checksum mismatch: offset 0
)

func (s checkpointState) String() string {
	switch s {
	case checkpointMissing:
		return "missing"
	case checkpointV0:
		return "version 0"
	case checkpointV1:
		return "version 1"
	}
	return "damaged"
}

// checkpoint is one checkpoint file as read.
type checkpoint struct {
	offset int64
	state  checkpointState
	// problem says why state is checkpointBad.
	problem string
}

// loadCheckpoint reads a checkpoint file of either format. Only an I/O
// error is an error: a file that fails its checks is checkpointBad with
// offset 0, which the caller decides about (and logs).
func loadCheckpoint(path string) (checkpoint, error) {
	data, err := fsutil.ReadFileMax(path, maxCheckpointFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return checkpoint{state: checkpointMissing}, nil
	case errors.Is(err, fsutil.ErrFileTooLarge):
		return checkpoint{state: checkpointBad, problem: fmt.Sprintf("larger than %d bytes", maxCheckpointFile)}, nil
	case err != nil:
		return checkpoint{}, fmt.Errorf("cannot read checkpoint %s: %w", path, err)
	}
	return parseCheckpoint(data), nil
}

// parseCheckpoint decodes a checkpoint file's bytes.
func parseCheckpoint(data []byte) checkpoint {
	bad := func(why string) checkpoint { return checkpoint{state: checkpointBad, problem: why} }
	lines := strings.Split(string(data), "\n")
	if len(lines) < 3 {
		return bad("fewer than 3 lines")
	}
	state := checkpointV0
	switch lines[0] {
	case "0":
	case "1":
		state = checkpointV1
		if len(lines) < 4 {
			return bad("version 1 without its checksum line")
		}
		body := len(lines[0]) + len(lines[1]) + len(lines[2]) + 3
		want, err := strconv.ParseUint(lines[3], 16, 32)
		if err != nil || len(lines[3]) != 8 {
			return bad(fmt.Sprintf("checksum line %q", lines[3]))
		}
		if got := crc32.Checksum(data[:body], castagnoli); got != uint32(want) {
			return bad(fmt.Sprintf("checksum %08x, file says %08x", got, want))
		}
	default:
		return bad(fmt.Sprintf("version %q", lines[0]))
	}
	if lines[1] != "1" {
		return bad(fmt.Sprintf("entry count %q", lines[1]))
	}
	fields := strings.Fields(lines[2])
	if len(fields) != 3 {
		return bad(fmt.Sprintf("entry %q", lines[2]))
	}
	off, err := strconv.ParseInt(fields[2], 10, 64)
	if err != nil || off < 0 {
		return bad(fmt.Sprintf("offset %q", fields[2]))
	}
	return checkpoint{offset: off, state: state}
}

// readCheckpoint reads an offset from a checkpoint file of either format;
// a missing or damaged file is offset 0.
func readCheckpoint(path string) (int64, error) {
	ck, err := loadCheckpoint(path)
	return ck.offset, err
}

// checkpointBytes encodes a version 1 checkpoint file for the partition in
// dir.
func checkpointBytes(dir string, offset int64) []byte {
	name := filepath.Base(dir)
	topic, part := name, "0"
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		topic, part = name[:i], name[i+1:]
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "1\n1\n%s %s %d\n", topic, part, offset)
	fmt.Fprintf(&b, "%08x\n", crc32.Checksum(b.Bytes(), castagnoli))
	return b.Bytes()
}

func writeCheckpoint(path, dir string, offset int64) error {
	return fsutil.WriteFileAtomic(path, checkpointBytes(dir, offset))
}

// CheckpointFile is a checkpoint file (recovery-point-offset-checkpoint,
// log-start-offset-checkpoint) as read, for offline checks.
type CheckpointFile struct {
	Offset int64
	// Version is 0 (Kafka's format) or 1 (checksummed); -1 when the file
	// is missing (Offset 0) or damaged.
	Version int
	// Damage says why a file that exists is damaged; "" if it is not.
	Damage string
}

// ReadCheckpointFile reads a checkpoint file of either version without
// changing anything. Only an I/O error is an error.
func ReadCheckpointFile(path string) (CheckpointFile, error) {
	ck, err := loadCheckpoint(path)
	if err != nil {
		return CheckpointFile{}, err
	}
	out := CheckpointFile{Offset: ck.offset, Version: -1, Damage: ck.problem}
	switch ck.state {
	case checkpointV0:
		out.Version = 0
	case checkpointV1:
		out.Version = 1
	}
	return out, nil
}

// current reports whether the file is as this code writes it (version 1,
// checks passed): one in Kafka's format is written again in version 1, and
// a damaged or missing one written again, at the open's first checkpoint.
func (c checkpoint) current() bool { return c.state == checkpointV1 }
