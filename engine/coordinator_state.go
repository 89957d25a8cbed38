package engine

import (
	"encoding/binary"
	"errors"
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
	id         string
	pid        int64
	prevPID    int64
	epoch      int16
	lastEpoch  int16
	timeout    time.Duration
	state      TxnState
	partitions []TopicPartitionRef
	start      int64 // ms; -1 when no transaction is open
	lastUpdate int64 // ms
	tv2        bool
}

// TopicPartitionRef names a partition in a transaction.
type TopicPartitionRef struct {
	Topic     string
	Partition int32
}

// Value layout (idemlog's, version 0; Kafka's transaction-log value v1
// carries the same fields):
//
//	version int16 = 0 | pid int64 | prevPID int64 | epoch int16 |
//	lastEpoch int16 | timeoutMs int32 | state int8 | tv2 int8 |
//	start int64 | lastUpdate int64 | partitions int32 |
//	(topicLen int16 | topic | partition int32)*
//
// The record key is the transactional id.
const txnValueFixed = 2 + 8 + 8 + 2 + 2 + 4 + 1 + 1 + 8 + 8 + 4

var errTxnValue = errors.New("malformed transaction-state record")

func (m *txnMeta) encode(dst []byte) []byte {
	be := binary.BigEndian
	dst = be.AppendUint16(dst, 0)
	dst = be.AppendUint64(dst, uint64(m.pid))
	dst = be.AppendUint64(dst, uint64(m.prevPID))
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

func decodeTxnMeta(id string, b []byte) (*txnMeta, error) {
	if len(b) < txnValueFixed || binary.BigEndian.Uint16(b) != 0 {
		return nil, errTxnValue
	}
	be := binary.BigEndian
	m := &txnMeta{id: id,
		pid:        int64(be.Uint64(b[2:])),
		prevPID:    int64(be.Uint64(b[10:])),
		epoch:      int16(be.Uint16(b[18:])),
		lastEpoch:  int16(be.Uint16(b[20:])),
		timeout:    time.Duration(int32(be.Uint32(b[22:]))) * time.Millisecond,
		state:      TxnState(b[26]),
		tv2:        b[27] == 1,
		start:      int64(be.Uint64(b[28:])),
		lastUpdate: int64(be.Uint64(b[36:])),
	}
	n := int(int32(be.Uint32(b[44:])))
	p := b[txnValueFixed:]
	if n < 0 || n > len(p)/6 || m.state > TxnCompleteAbort {
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
		m.partitions = append(m.partitions, TopicPartitionRef{Topic: string(p[2 : 2+l]), Partition: int32(be.Uint32(p[2+l:]))})
		p = p[2+l+4:]
	}
	return m, nil
}
