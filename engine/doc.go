// Package engine is idemlog as a library: a data directory of topics, each
// a set of partitions, with Kafka's idempotent-producer guarantees enforced
// on every append.
//
// # Basics
//
//	e, _ := engine.Open(dir, engine.Options{})
//	e.CreateTopic("orders", 3)
//	p, _ := e.Partition("orders", 0)
//	pr, _ := e.NewProducer()            // a producer id, unique across restarts
//	bld := batch.NewBuilder(batch.CodecZstd)
//	bld.Append(ts, key, value, nil)
//	res, err := pr.Send(p, bld)         // numbered, retried safely, never duplicated
//
// Partition.Append takes raw Kafka record batches, as a Kafka producer sends
// them, and applies the broker's rules (package producer): an in-order batch
// is appended; an exact retry of one of the producer's last five batches gets
// the original offsets and is not written again; a gap or an overlap gets
// OUT_OF_ORDER_SEQUENCE_NUMBER; a stale epoch gets INVALID_PRODUCER_EPOCH.
// Every error wraps a sentinel carrying its Kafka code (errcode.Code).
//
// # Concurrency
//
// Each partition has a producer table (package pidtable) and a log
// (package partition). An append locks its producer's table entry with a
// CAS on that entry's own lock word, checks, takes the log's writer mutex
// for the copy, updates the entry inside that mutex, and unlocks the entry.
// Two appends of the same producer are therefore serialized (a batch sent
// twice at once is written once, with one set of offsets), and appends of
// different producers share nothing but the writer mutex, held only for
// the copy. The entry's state is written only inside the writer mutex and
// read either under the entry lock (checks) or under the writer mutex
// (snapshots): each read is ordered after the last write by one of the two
// locks, which is the whole memory-ordering argument; the table's own
// lock-free protocol (finding and claiming entries) is argued in pidtable.
//
// # What exactly-once covers
//
// Exactly-once holds inside the log: a record appended through a producer
// is stored once, whatever the retries, crashes and restarts, and (with
// transactions) consumer offsets commit atomically with the output. It
// does not reach outside: if a consumer of the log writes to a database or
// calls a service, that side effect needs its own idempotency, for example
// a write keyed by the record's (topic, partition, offset), or a table of
// processed offsets updated in the same database transaction. Package sink
// implements the latter (Consumer.Seek positions its reads).
//
// # Caveats
//
//   - Transactions are atomic across process crashes under every sync
//     policy, and across machine crashes under SyncAlways only: there a
//     transaction's batches, then its decision, then its markers are each
//     synced before the next step. Under the other policies a machine
//     crash may lose the unsynced tail of any log, a transaction's data,
//     decision and markers included, so part of a transaction may be
//     lost; the decision is then not synced either (it would not close
//     that gap, and would cost an fdatasync per transaction).
//   - After a restart a producer's dedup cache holds its newest batch (from
//     the snapshot) plus whatever replay adds, as on a Kafka broker: a retry
//     of an older batch gets OUT_OF_ORDER_SEQUENCE_NUMBER. A producer keeping
//     at most 5 batches in flight per partition (Producer does) only ever
//     retries batches that are still recognised.
//   - The engine runs its own maintenance (Options.MaintainInterval, 1 s):
//     transactions past their timeout are aborted and their producers
//     fenced, producer and transactional ids expire, retention is applied
//     every RetentionInterval. With a clock of the caller's (Options.Now)
//     it is off unless asked for: who drives the clock calls
//     Coordinator.AbortTimedOut, ExpireProducers and ApplyRetention.
//   - A TransactionalProducer whose Send or SendOffsets failed must Abort
//     before it can Commit (Kafka's abortable state); once fenced, every
//     call fails with ErrProducerFenced.
//   - Producer state expires after ProducerIDExpiration of inactivity,
//     measured by the producer's own batch timestamps; a producer that
//     returns later is unknown and any sequence is accepted again.
//   - MaxProducersPerPartition bounds memory: past it, appends from new
//     producers fail (pidtable.ErrTooManyProducers) until old ones expire.
//     A partition that reopens with more producers in its log than the
//     limit now allows keeps them all; the limit applies to new ones.
//   - Transactional writes the embedding program makes itself
//     (Partition.Append of a transactional batch, Engine.TxnCommitOffsets)
//     are trusted: the program must not write for a transaction it has
//     ended. A front end serving clients verifies them instead
//     (BeginVerification, AppendNoWaitVerified, Coordinator.TxnCommitOffsets;
//     verify.go), as the Kafka listener does; TransactionalProducer does it
//     for offsets.
//   - A data dir where transactions were used recovers its coordinator in
//     Open (markers a crash cut short, orphan transactions), so Open can
//     fail with the coordinator's recovery error.
//   - The internal topics (__consumer_offsets, __transaction_state) have no
//     retention: they are compacted, as in Kafka (cleaner.go), so they stay
//     bounded by their live keys. They cannot be deleted.
//   - DeleteTopic is durable per partition: a crash in the middle of one
//     leaves the topic with its first partitions, which a second
//     DeleteTopic deletes.
package engine
