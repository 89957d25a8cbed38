// Package producer holds Kafka's broker-side rules for idempotent and
// transactional producers, as pure functions over one producer's state in
// one partition (pidtable.State), and the producer-state snapshot format.
//
// # The rules (Kafka's, client origin)
//
// Let E be the stored epoch (-1 if the producer is unknown), L the last
// sequence of the newest cached batch (-1 if none), and the incoming batch
// carry epoch e, first sequence s and last sequence t:
//
//  1. Duplicate: known, e == E, and a cached batch has exactly firstSeq s
//     and lastSeq t: nothing is written; the append answers with that
//     batch's original offsets and timestamp.
//  2. e < E: ErrInvalidProducerEpoch (47): the writer is a zombie.
//  3. e > E: s must be 0, unless the producer is unknown (E == -1), in
//     which case any s is accepted (KIP-360). The cache restarts.
//  4. e == E: s must follow L (L+1, or 0 after MaxInt32); with an empty
//     cache s must be 0. Anything else, including a retry older than the
//     5 cached batches or a partial overlap, is ErrOutOfOrderSequence (45).
//  5. A non-transactional batch from a producer with an open transaction
//     is ErrInvalidTxnState (48).
//
// idemlog never answers DUPLICATE_SEQUENCE_NUMBER (46) or
// UNKNOWN_PRODUCER_ID (59); batches without a producer id skip all of this.
//
// Check reads the state; Apply changes it and runs only after the batch is
// in the log, so a failed write leaves the state as it was. Replay (log
// recovery) applies batches without checks, as Kafka's replication origin
// does.
//
// # Snapshots
//
// A snapshot (<20-digit offset>.snapshot) holds, for every producer, its
// epoch, coordinator epoch, open transaction and newest cached batch, as
// of the exclusive end offset in its name. The format is Kafka's, version 1:
//
//	0  int16  version = 1
//	2  uint32 crc: CRC-32C of bytes [6, EOF)
//	6  int32  entry count
//	10 46-byte entries: producerId int64, epoch int16, lastSequence int32,
//	   lastOffset int64 (-1: no cached batch), offsetDelta int32,
//	   timestamp int64, coordinatorEpoch int32, currentTxnFirstOffset int64
//	   (-1: none)
//
// After a restart the cache therefore holds one batch per producer plus
// what replay adds: a retry of the newest batch is still recognised, older
// ones get 45, exactly as on a Kafka broker.
package producer
