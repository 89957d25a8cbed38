package producer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/idemlog/idemlog/errcode"
	"github.com/idemlog/idemlog/pidtable"
)

const (
	snapshotVersion    = 1
	snapshotHeaderSize = 10
	snapshotEntrySize  = 46
	// SnapshotSuffix ends every snapshot file name.
	SnapshotSuffix = ".snapshot"
)

// ErrSnapshotCorrupt: a snapshot that is truncated, has a bad CRC or an
// unknown version. Loading skips it for an older one.
var ErrSnapshotCorrupt = errcode.New(errcode.CorruptMessage, "corrupt producer snapshot")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// SnapshotEntry is one producer in a snapshot.
type SnapshotEntry struct {
	ProducerID       int64
	Epoch            int16
	LastSequence     int32
	LastOffset       int64 // -1: no cached batch
	OffsetDelta      int32
	Timestamp        int64
	CoordinatorEpoch int32
	TxnFirstOffset   int64 // -1: no open transaction
}

// EntryOf returns the snapshot entry of a producer's state. Its timestamp
// is the producer's last timestamp, as Kafka's writeSnapshot stores it, not
// the newest cached batch's: a marker moves the former (ApplyMarker) and
// expiry, at load too, runs on it. (Without this: after a same-epoch
// commit the snapshot kept the older batch's timestamp, and a reopen
// expired a producer that was live before the close.)
func EntryOf(pid int64, s *pidtable.State) SnapshotEntry {
	e := SnapshotEntry{ProducerID: pid, Epoch: s.Epoch(), LastSequence: -1, LastOffset: -1,
		Timestamp: s.LastTimestamp, CoordinatorEpoch: s.CoordinatorEpoch(), TxnFirstOffset: s.TxnFirstOffset()}
	if m := s.Newest(); m != nil {
		e.LastSequence, e.LastOffset, e.OffsetDelta = m.LastSeq, m.LastOffset, m.OffsetDelta
	}
	return e
}

// Restore loads a snapshot entry into a producer's (empty) state.
func (e SnapshotEntry) Restore(s *pidtable.State) {
	*s = pidtable.State{}
	s.SetEpoch(e.Epoch)
	s.SetCoordinatorEpoch(e.CoordinatorEpoch)
	s.SetTxnFirstOffset(e.TxnFirstOffset)
	s.LastTimestamp = e.Timestamp
	if e.LastOffset >= 0 {
		s.Push(pidtable.BatchMeta{LastOffset: e.LastOffset, Timestamp: e.Timestamp, LastSeq: e.LastSequence, OffsetDelta: e.OffsetDelta})
	}
}

// SnapshotWriter accumulates a snapshot image in memory: the partition
// fills it under its writer lock (a copy of 46 bytes per producer) and
// writes the file later, off the append path.
type SnapshotWriter struct {
	buf []byte
}

// Reset starts a new image, keeping the buffer.
func (w *SnapshotWriter) Reset() {
	w.buf = append(w.buf[:0], make([]byte, snapshotHeaderSize)...)
}

// Add appends one entry.
func (w *SnapshotWriter) Add(e SnapshotEntry) {
	b := w.buf
	b = binary.BigEndian.AppendUint64(b, uint64(e.ProducerID))
	b = binary.BigEndian.AppendUint16(b, uint16(e.Epoch))
	b = binary.BigEndian.AppendUint32(b, uint32(e.LastSequence))
	b = binary.BigEndian.AppendUint64(b, uint64(e.LastOffset))
	b = binary.BigEndian.AppendUint32(b, uint32(e.OffsetDelta))
	b = binary.BigEndian.AppendUint64(b, uint64(e.Timestamp))
	b = binary.BigEndian.AppendUint32(b, uint32(e.CoordinatorEpoch))
	b = binary.BigEndian.AppendUint64(b, uint64(e.TxnFirstOffset))
	w.buf = b
}

// Bytes seals the image: version, CRC and count. The slice is valid until
// the next Reset.
func (w *SnapshotWriter) Bytes() []byte {
	if len(w.buf) < snapshotHeaderSize {
		w.Reset()
	}
	b := w.buf
	binary.BigEndian.PutUint16(b, snapshotVersion)
	binary.BigEndian.PutUint32(b[6:], uint32((len(b)-snapshotHeaderSize)/snapshotEntrySize))
	binary.BigEndian.PutUint32(b[2:], crc32.Checksum(b[6:], castagnoli))
	return b
}

// ParseSnapshot decodes a snapshot image.
func ParseSnapshot(b []byte) ([]SnapshotEntry, error) {
	if len(b) < snapshotHeaderSize {
		return nil, fmt.Errorf("cannot parse snapshot: %d bytes: %w", len(b), ErrSnapshotCorrupt)
	}
	if v := int16(binary.BigEndian.Uint16(b)); v != snapshotVersion {
		return nil, fmt.Errorf("cannot parse snapshot: version %d: %w", v, ErrSnapshotCorrupt)
	}
	if stored, computed := binary.BigEndian.Uint32(b[2:]), crc32.Checksum(b[6:], castagnoli); stored != computed {
		return nil, fmt.Errorf("cannot parse snapshot: crc %08x, computed %08x: %w", stored, computed, ErrSnapshotCorrupt)
	}
	n := int64(int32(binary.BigEndian.Uint32(b[6:])))
	if n < 0 || n*snapshotEntrySize != int64(len(b)-snapshotHeaderSize) {
		return nil, fmt.Errorf("cannot parse snapshot: %d entries in %d bytes: %w", n, len(b)-snapshotHeaderSize, ErrSnapshotCorrupt)
	}
	out := make([]SnapshotEntry, n)
	p := b[snapshotHeaderSize:]
	for i := range out {
		be := binary.BigEndian
		out[i] = SnapshotEntry{
			ProducerID:       int64(be.Uint64(p)),
			Epoch:            int16(be.Uint16(p[8:])),
			LastSequence:     int32(be.Uint32(p[10:])),
			LastOffset:       int64(be.Uint64(p[14:])),
			OffsetDelta:      int32(be.Uint32(p[22:])),
			Timestamp:        int64(be.Uint64(p[26:])),
			CoordinatorEpoch: int32(be.Uint32(p[34:])),
			TxnFirstOffset:   int64(be.Uint64(p[38:])),
		}
		p = p[snapshotEntrySize:]
	}
	return out, nil
}

// SnapshotName returns the file name of the snapshot at offset.
func SnapshotName(offset int64) string { return fmt.Sprintf("%020d%s", offset, SnapshotSuffix) }

// ListSnapshots returns the offsets of the snapshots in dir, ascending.
func ListSnapshots(dir string) ([]int64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("cannot list snapshots: %w", err)
	}
	var offs []int64
	for _, e := range entries {
		digits, ok := strings.CutSuffix(e.Name(), SnapshotSuffix)
		if !ok || len(digits) != 20 {
			continue
		}
		if n, err := strconv.ParseInt(digits, 10, 64); err == nil && n >= 0 {
			offs = append(offs, n)
		}
	}
	sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
	return offs, nil
}

// LoadNewest returns the entries of the newest valid snapshot in dir at or
// below limit, and its offset. Snapshots above limit (the log was cut below
// them) and corrupt ones are deleted on the way, as Kafka does; with none
// left it returns offset -1.
func LoadNewest(dir string, limit int64) ([]SnapshotEntry, int64, error) {
	return loadAtMost(dir, limit, true, discard)
}

// LoadNewestLogged is LoadNewest, logging each snapshot it deletes and
// why (WARN for a corrupt one).
func LoadNewestLogged(dir string, limit int64, log *slog.Logger) ([]SnapshotEntry, int64, error) {
	return loadAtMost(dir, limit, true, log)
}

// LoadAtMostLogged is LoadAtMost, logging each snapshot it deletes.
func LoadAtMostLogged(dir string, limit int64, log *slog.Logger) ([]SnapshotEntry, int64, error) {
	return loadAtMost(dir, limit, false, log)
}

var discard = slog.New(slog.DiscardHandler)

// LoadAtMost is LoadNewest for a limit below the log end (recovery rebuilt
// the log from there): snapshots above limit are valid and kept.
func LoadAtMost(dir string, limit int64) ([]SnapshotEntry, int64, error) {
	return loadAtMost(dir, limit, false, discard)
}

func loadAtMost(dir string, limit int64, dropAbove bool, log *slog.Logger) ([]SnapshotEntry, int64, error) {
	offs, err := ListSnapshots(dir)
	if err != nil {
		return nil, -1, err
	}
	for i := len(offs) - 1; i >= 0; i-- {
		path := filepath.Join(dir, SnapshotName(offs[i]))
		if offs[i] > limit {
			if !dropAbove {
				continue
			}
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, -1, fmt.Errorf("cannot delete snapshot beyond the log: %w", err)
			}
			log.Info("deleted a producer snapshot above the log end", "dir", dir, "file", SnapshotName(offs[i]), "log_end", limit)
			continue
		}
		data, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			// An I/O error says nothing of the file's content: keep it
			// and fail, rather than delete a good snapshot and rebuild
			// from an older one. Only a file that does not parse is
			// corrupt.
			return nil, -1, fmt.Errorf("cannot read snapshot %s: %w", path, err)
		}
		entries, err := ParseSnapshot(data)
		if err == nil {
			return entries, offs[i], nil
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, -1, fmt.Errorf("cannot delete corrupt snapshot: %w", err)
		}
		log.Warn("deleted a corrupt producer snapshot: producer state is rebuilt from an older one and the log",
			"dir", dir, "file", SnapshotName(offs[i]), "error", err)
	}
	return nil, -1, nil
}
