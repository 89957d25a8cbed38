package engine

import (
	"encoding/binary"
	"fmt"
	"time"
)

// TxnState is a transaction's coordinator state (Kafka's ids, 3.1).
type TxnState int8

const (
	TxnEmpty          TxnState = 0
	TxnOngoing        TxnState = 1
	TxnPrepareCommit  TxnState = 2
	TxnPrepareAbort   TxnState = 3
	TxnCompleteCommit TxnState = 4
	TxnCompleteAbort  TxnState = 5
)

var txnStateNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort"}

func (s TxnState) String() string {
	if s >= 0 && int(s) < len(txnStateNames) {
		return txnStateNames[s]
	}
	return fmt.Sprintf("TxnState(%d)", int8(s))
}

// txnMeta is one transactional id's metadata, as persisted in
// __transaction_state.
type txnMeta struct {
	id      string
	pid     int64
	prevPID int64
	// nextPID is the producer id a version-2 end at the exhausted epoch
	// moves to (allocated with PrepareCommit/PrepareAbort, taken on at
	// CompleteCommit/CompleteAbort); -1 otherwise.
	nextPID    int64
	epoch      int16
	lastEpoch  int16
	timeout    time.Duration
	state      TxnState
	partitions []TopicPartition
	start      int64 // ms; -1 when no transaction is open
	lastUpdate int64 // ms
	tv2        bool
	// deciding is set, in memory only, while a PrepareCommit/PrepareAbort
	// record waits for its sync with the coordinator's mutex released
	// (endLocked): the decision is not durable yet, so nothing may write
	// the transaction's markers, and every request on the id answers
	// CONCURRENT_TRANSACTIONS.
	deciding bool
}

// Value layout (idemlog's; Kafka's transaction-log value v1 carries the
// same fields, nextPID as its NextProducerId tag):
//
//	version int16 | pid int64 | prevPID int64 | [nextPID int64, version 1] |
//	epoch int16 | lastEpoch int16 | timeoutMs int32 | state int8 | tv2 int8 |
//	start int64 | lastUpdate int64 | partitions int32 |
//	(topicLen int16 | topic | partition int32)*
//
// Version 0 has no nextPID (read as -1) and is what is written whenever
// nextPID is -1, so that only the decision of an end that rotates the
// producer id needs a reader that knows version 1. The record key is the
// transactional id.
const txnValueFixed = 2 + 8 + 8 + 2 + 2 + 4 + 1 + 1 + 8 + 8 + 4 // version 0

var errTxnValue = fmt.Errorf("malformed transaction-state record: %w", ErrCorruptMetadata)

func (m *txnMeta) encode(dst []byte) []byte {
	be := binary.BigEndian
	if m.nextPID < 0 {
		dst = be.AppendUint16(dst, 0)
		dst = be.AppendUint64(dst, uint64(m.pid))
		dst = be.AppendUint64(dst, uint64(m.prevPID))
	} else {
		dst = be.AppendUint16(dst, 1)
		dst = be.AppendUint64(dst, uint64(m.pid))
		dst = be.AppendUint64(dst, uint64(m.prevPID))
		dst = be.AppendUint64(dst, uint64(m.nextPID))
	}
	dst = be.AppendUint16(dst, uint16(m.epoch))
	dst = be.AppendUint16(dst, uint16(m.lastEpoch))
	dst = be.AppendUint32(dst, uint32(m.timeout.Milliseconds()))
	dst = append(dst, byte(m.state))
	tv2 := byte(0)
	if m.tv2 {
		tv2 = 1
	}
	dst = append(dst, tv2)
	dst = be.AppendUint64(dst, uint64(m.start))
	dst = be.AppendUint64(dst, uint64(m.lastUpdate))
	dst = be.AppendUint32(dst, uint32(len(m.partitions)))
	for _, tp := range m.partitions {
		dst = be.AppendUint16(dst, uint16(len(tp.Topic)))
		dst = append(dst, tp.Topic...)
		dst = be.AppendUint32(dst, uint32(tp.Partition))
	}
	return dst
}

// decodeTxnMeta reads a value of version 0 or 1.
func decodeTxnMeta(id string, b []byte) (*txnMeta, error) {
	be := binary.BigEndian
	if len(b) < 2 {
		return nil, errTxnValue
	}
	m := &txnMeta{id: id, nextPID: -1}
	switch be.Uint16(b) {
	case 0:
		if len(b) < txnValueFixed {
			return nil, errTxnValue
		}
		m.pid, m.prevPID = int64(be.Uint64(b[2:])), int64(be.Uint64(b[10:]))
		b = b[18:]
	case 1:
		if len(b) < txnValueFixed+8 {
			return nil, errTxnValue
		}
		m.pid, m.prevPID, m.nextPID = int64(be.Uint64(b[2:])), int64(be.Uint64(b[10:])), int64(be.Uint64(b[18:]))
		b = b[26:]
	default:
		return nil, errTxnValue
	}
	// b now starts at epoch: 28 fixed bytes up to the partition count.
	m.epoch = int16(be.Uint16(b[0:]))
	m.lastEpoch = int16(be.Uint16(b[2:]))
	m.timeout = time.Duration(int32(be.Uint32(b[4:]))) * time.Millisecond
	m.state = TxnState(b[8])
	m.tv2 = b[9] == 1
	m.start = int64(be.Uint64(b[10:]))
	m.lastUpdate = int64(be.Uint64(b[18:]))
	n := int(int32(be.Uint32(b[26:])))
	p := b[30:]
	if n < 0 || n > len(p)/6 || m.state < 0 || m.state > TxnCompleteAbort {
		return nil, errTxnValue
	}
	for range n {
		if len(p) < 2 {
			return nil, errTxnValue
		}
		l := int(be.Uint16(p))
		if len(p) < 2+l+4 {
			return nil, errTxnValue
		}
		m.partitions = append(m.partitions, TopicPartition{Topic: string(p[2 : 2+l]), Partition: int32(be.Uint32(p[2+l:]))})
		p = p[2+l+4:]
	}
	return m, nil
}
