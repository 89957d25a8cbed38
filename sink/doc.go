// Package sink applies a topic's committed records to an external store
// exactly once, by storing the consumer's position in the same store
// transaction as the records' effects.
//
// Exactly-once inside the log (idempotent producers, transactions,
// offsets committed with the output) ends where a consumer writes
// somewhere else. Committing the consumer's offsets to the log after the
// database commit applies a record twice if the process dies in between;
// committing them before loses it. The sink removes the gap: the
// position is a row in the same database, written in the same
// transaction as the effect, so both commit or neither does, and a
// restarted sink reads its positions from the database, never from the
// log's committed offsets.
//
// # Basics
//
//	src, _ := sink.NewEngineSource(e, "transfers")          // all partitions, read_committed
//	store, _ := sink.NewSQLStore(ctx, db, sink.SQLOptions{}) // table sink_positions, created if missing
//	s, _ := sink.New(src, store, "balances", func(ctx context.Context, tx *sink.SQLTx, recs []sink.Record) error {
//		for _, r := range recs {
//			if _, err := tx.ExecContext(ctx, "UPDATE ...", ...); err != nil {
//				return err // rolls back the effects and the positions
//			}
//		}
//		return nil
//	})
//	err := s.Run(ctx)
//
// The loop, for each Source.Fetch (a batch of records from one or more
// partitions, each in offset order, without aborted records):
//
//  1. Store.Begin starts a transaction;
//  2. the Handler applies the records through it;
//  3. Tx.SetPosition records (group, topic, partition) -> next offset
//     for every partition read, conditional on the stored value being the
//     one the sink last saw;
//  4. Tx.Commit commits both.
//
// Any error in 1-4 rolls back (or, for Commit, leaves the outcome to the
// store), Poll and Run return it, and the next Poll reads the positions
// from the store again and seeks the source to them. A crash at any point
// leaves the store with the effects of exactly the records before its
// positions, so the restarted sink applies each committed record once.
// A partition with no stored position starts at its first retained record
// (FromStart).
//
// Other stores plug in through Store and Tx (a key-value store whose
// batches are atomic writes the positions into the batch; a file
// rewritten atomically holds them next to the data); other sources
// through Source, for example a Kafka client reading a broker at
// read_committed (the interop module's sinksource_test.go has one over
// franz-go's kgo, kept out of this module's dependencies).
//
// # Idempotency keys
//
// An effect that cannot join the transaction (an HTTP call, an email)
// gets Record.IdempotencyKey, "topic/partition/offset". What it
// guarantees: as long as the sink is run again after each failure, the
// handler is called for a committed record until a transaction containing
// the record commits, so a call the handler makes for it is made at least
// once, and every attempt for the record carries the same key, across
// retries, rolled-back transactions and restarts. What it does not: the
// call happens again whenever the transaction that encloses it does not commit
// (a later record's handler fails, the position update conflicts, the
// process dies before the commit), so the receiver sees duplicates; the
// effect happens exactly once only if the receiver keeps the keys it has
// seen and ignores a repeat (as payment APIs with an Idempotency-Key
// header do). The sink cannot check that it does. The key names the
// record, not the purpose: two different effects of one record on the
// same receiver need the caller's own prefix. And a call made for a
// record whose transaction never commits because the sink is abandoned
// has happened anyway.
//
// # Caveats
//
//   - One sink per group at a time. A second instance is not fenced in
//     advance; its transactions fail instead (ErrPositionConflict from the
//     conditional update, or the store's unique-key or serialization
//     error), so effects are still applied once, but the two keep
//     failing each other's work. Run instances of a group one at a time,
//     or give them disjoint partitions and distinct group names.
//   - Exactly-once needs real transactions: the effects and the position
//     row must commit atomically and survive what the positions must
//     survive. With SQLite in WAL mode and synchronous=NORMAL a commit
//     survives a process crash but may be lost in a power loss, as the
//     engine's SyncNever may lose the log's tail: then store and log
//     agree on an older state only if both sync (synchronous=FULL,
//     partition.SyncAlways).
//   - A stored position below the partition's log start (retention or
//     DeleteRecordsBefore removed records not yet applied) makes Fetch
//     fail with partition.ErrOffsetOutOfRange: the sink does not skip
//     records silently. Deleting the group's rows starts it over from the
//     first retained record.
//   - A topic deleted and created again starts its offsets at zero: its
//     stored positions, and the idempotency keys a receiver remembers,
//     name records that are gone. Delete the group's rows (and the
//     receiver's keys) with the topic.
//   - Positions move only in transactions that apply records: a fetch
//     that passed only aborted records or transaction markers stores
//     nothing, and a restart reads them again, applying nothing.
//   - Records are valid only during the Handler's call (the Fetched
//     buffers are reused).
//   - EngineSource reads the partitions a topic has when it is created;
//     partitions added later need a new source.
package sink
