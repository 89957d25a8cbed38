package logdump

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"

	"github.com/idemlog/idemlog/internal/fsutil"
	"github.com/idemlog/idemlog/producer"
	"github.com/idemlog/idemlog/txnindex"
)

// maxSnapshotFile bounds the producer snapshot dump reads into memory: a
// partition's table holds at most a few million producers of 46 bytes.
const maxSnapshotFile = 1 << 30

// dumpSnapshotFile prints a producer-state snapshot (<offset>.snapshot, the
// producer package's format), one producer per line, in the words of
// Kafka's DumpLogSegments for its .snapshot files, or one JSON object per
// producer. A file that fails its checks (version, CRC, size) is an error
// and prints nothing but the error.
func dumpSnapshotFile(w io.Writer, path string, opts Options) error {
	data, err := fsutil.ReadFileMax(path, maxSnapshotFile)
	if err != nil {
		return fmt.Errorf("cannot dump %s: %w", path, err)
	}
	entries, err := producer.ParseSnapshot(data)
	if err != nil {
		if !opts.JSON {
			fmt.Fprintf(w, "Dumping %s\nerror: %v\n", path, err)
		}
		return fmt.Errorf("cannot dump %s: %w", path, err)
	}
	out := bufio.NewWriter(w)
	if !opts.JSON {
		fmt.Fprintf(out, "Dumping %s\n", path)
	}
	for _, e := range entries {
		if opts.JSON {
			line, _ := json.Marshal(snapshotJSON{ProducerID: e.ProducerID, ProducerEpoch: e.Epoch,
				CoordinatorEpoch: e.CoordinatorEpoch, CurrentTxnFirstOffset: e.TxnFirstOffset,
				LastTimestamp: e.Timestamp, LastSequence: e.LastSequence, LastOffset: e.LastOffset,
				OffsetDelta: e.OffsetDelta})
			out.Write(append(line, '\n'))
			continue
		}
		txn := "None"
		if e.TxnFirstOffset >= 0 {
			txn = fmt.Sprint(e.TxnFirstOffset)
		}
		fmt.Fprintf(out, "producerId: %d producerEpoch: %d coordinatorEpoch: %d currentTxnFirstOffset: %s lastTimestamp: %d lastSequence: %d lastOffset: %d offsetDelta: %d\n",
			e.ProducerID, e.Epoch, e.CoordinatorEpoch, txn, e.Timestamp, e.LastSequence, e.LastOffset, e.OffsetDelta)
	}
	if !opts.JSON {
		fmt.Fprintf(out, "Summary: %s\n", count(int64(len(entries)), "producer", "producers"))
	}
	if err := out.Flush(); err != nil {
		return fmt.Errorf("cannot write dump of %s: %w", path, err)
	}
	return nil
}

// snapshotJSON is one producer of a snapshot in --json output.
type snapshotJSON struct {
	ProducerID            int64 `json:"producerId"`
	ProducerEpoch         int16 `json:"producerEpoch"`
	CoordinatorEpoch      int32 `json:"coordinatorEpoch"`
	CurrentTxnFirstOffset int64 `json:"currentTxnFirstOffset"` // -1: none
	LastTimestamp         int64 `json:"lastTimestamp"`
	LastSequence          int32 `json:"lastSequence"`
	LastOffset            int64 `json:"lastOffset"` // -1: no batch cached
	OffsetDelta           int32 `json:"offsetDelta"`
}

// dumpTxnIndexFile prints an aborted-transaction index (<base>.txnindex),
// one entry per line in the words of Kafka's DumpLogSegments, or one JSON
// object per entry. Its base offset comes from its name; the file is
// checked as the txnindex package opens it.
func dumpTxnIndexFile(w io.Writer, path string, opts Options) error {
	base, ok := parseBase(filepath.Base(path), ".txnindex")
	if !ok {
		return fmt.Errorf("cannot dump %s: name is not <20-digit base offset>.txnindex", path)
	}
	entries, err := txnindex.ReadFile(path, base)
	if err != nil {
		if !opts.JSON {
			fmt.Fprintf(w, "Dumping %s\nerror: %v\n", path, err)
		}
		return fmt.Errorf("cannot dump %s: %w", path, err)
	}
	out := bufio.NewWriter(w)
	if !opts.JSON {
		fmt.Fprintf(out, "Dumping %s\n", path)
	}
	for _, e := range entries {
		if opts.JSON {
			line, _ := json.Marshal(txnEntryJSON{ProducerID: e.ProducerID, FirstOffset: e.FirstOffset,
				LastOffset: e.LastOffset, LastStableOffset: e.LastStableOffset})
			out.Write(append(line, '\n'))
			continue
		}
		fmt.Fprintf(out, "version: 0 producerId: %d firstOffset: %d lastOffset: %d lastStableOffset: %d\n",
			e.ProducerID, e.FirstOffset, e.LastOffset, e.LastStableOffset)
	}
	if !opts.JSON {
		fmt.Fprintf(out, "Summary: %s\n", count(int64(len(entries)), "aborted transaction", "aborted transactions"))
	}
	if err := out.Flush(); err != nil {
		return fmt.Errorf("cannot write dump of %s: %w", path, err)
	}
	return nil
}

// txnEntryJSON is one aborted transaction in --json output.
type txnEntryJSON struct {
	ProducerID       int64 `json:"producerId"`
	FirstOffset      int64 `json:"firstOffset"`
	LastOffset       int64 `json:"lastOffset"`
	LastStableOffset int64 `json:"lastStableOffset"`
}
