// Package engine is idemlog as a library: a data directory of topics, each
// a set of partitions, with Kafka's exactly-once rules enforced on every
// append. This one import embeds it:
//
//	e, err := engine.Open(dir, engine.Options{Sync: engine.SyncAlways})
//	err = e.CreateTopic("orders", 3) // existing partitions are kept
//	p, err := e.Partition("orders", 0)
//
// Writing. A Producer (NewProducer) numbers its batches, so that a retry is
// never written twice; a TransactionalProducer (NewTransactionalProducer)
// writes to several partitions atomically and commits a consumer group's
// input offsets with its output (SendOffsets). Both take a batch.Builder
// and clear it once its batch is written. Partition.Append takes a raw
// Kafka record batch, as a Kafka producer sends it, under a broker's rules:
// an exact retry of one of the producer's last five batches gets the
// original offsets and is not written again, a gap gets
// OUT_OF_ORDER_SEQUENCE_NUMBER, a stale epoch INVALID_PRODUCER_EPOCH.
//
// Reading. A Consumer (NewConsumer) polls records in offset order at an
// isolation level and commits its positions for its group. Partition.Read
// and ReadCommitted return raw batches; HighWatermark, LastStableOffset
// and LogStartOffset say where a partition stands, Advanced when it moves.
//
// Errors wrap sentinels (ErrUnknownTopicOrPartition, ...) that carry their
// Kafka code (errcode.Code): errors.Is and a Kafka front end both read them.
//
// Frontend (Engine.Frontend) holds what only a Kafka front end needs: the
// transaction coordinator, verified appends, the consumer-offsets store by
// group, topic ids and configs, a read-only view of a log.
//
// # Caveats
//
//   - Exactly-once holds inside the log. A consumer's side effects outside
//     it (a database write, a call) need their own idempotency, such as a
//     table of processed offsets updated in the same database transaction:
//     package sink does that, positioning its reads with Consumer.Seek.
//   - Transactions are atomic across process crashes under every sync
//     policy, across machine crashes under SyncAlways only (there a
//     transaction's batches, decision and markers are each synced before
//     the next step); elsewhere a machine crash may lose any log's unsynced
//     tail, part of a transaction included.
//   - After a restart a producer's dedup cache holds its newest batch plus
//     what replay adds, as on a Kafka broker: a retry of an older batch gets
//     OUT_OF_ORDER_SEQUENCE_NUMBER. Producer keeps at most MaxInFlight
//     batches in flight per partition, so it only retries recognised ones.
//   - Producer state expires after Options.ProducerIDExpiration without a
//     batch (by the batches' timestamps); a producer back after that is
//     unknown and any sequence is accepted. MaxProducersPerPartition bounds
//     the state: past it, new producers' appends fail until old ones expire.
//   - The engine runs its own maintenance every Options.MaintainInterval:
//     transactions past their timeout are aborted and their producers
//     fenced, ids expire, retention applies. With a clock of the caller's
//     (Options.Now) the caller drives it through Frontend.
//   - A TransactionalProducer whose Send or SendOffsets failed must Abort
//     before it can Commit (Kafka's abortable state); once fenced, every
//     call fails with ErrProducerFenced. A transactional batch appended
//     with Partition.Append is trusted to belong to an ongoing transaction.
//   - Open recovers a transaction coordinator that was in use (markers a
//     crash cut short, orphan transactions), so it can fail with its error.
//   - The internal topics (IsInternalTopic) are the engine's: they cannot be
//     created, appended to or deleted through this API. They have no
//     retention: they are compacted, as in Kafka (cleaner.go), so they
//     stay bounded by their live keys.
//   - DeleteTopic is durable per partition: a crash in the middle of one
//     leaves the topic with its first partitions; DeleteTopic again deletes
//     them.
package engine

// Concurrency: each partition has a producer table (package pidtable) and a log
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
