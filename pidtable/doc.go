// Package pidtable keeps one partition's idempotent-producer state: for
// each producer id (PID) that wrote to the partition, its epoch, the
// coordinator epoch of its last marker, the first offset of its open
// transaction, the timestamp of its last batch, and its last five batches
// (docs/SEMANTICS.md §2.1). The rules that read and write it live in
// package producer; this package only stores it, and lets the append path
// lock one producer without any mutex shared by different producers.
//
// # Why per partition
//
// Kafka keeps a producer-state map per partition, and everything around it
// is per partition: snapshots (`<offset>.snapshot`), rebuilding from the
// log, truncation and expiry. A Table per partition keeps those operations
// local (a snapshot is one Range, a rebuild one Reset and a replay), and
// keeps appends to different partitions from ever touching shared memory.
//
// # What an entry holds
//
// A Table is 64 shards (Options.Shards), each an open-addressing array of
// Entry values with the State inline, so a producer costs no allocation and
// no pointer for the garbage collector:
//
//	Entry{ key atomic.Uint64  // pid+1; 0 = empty slot
//	       lock atomic.Uint32 // 0 free, 1 held, 2 moved, 3 dead
//	       state State }      // 152 bytes
//
// One Entry is 168 bytes (8 + 4 + 152, aligned to 8). The State's zero value
// means "no state yet", so claiming an empty slot writes only its key and
// lock word, never the State. Tables grow at load factor 3/4 to a size that puts them at 2/3
// (slotsFor), so a table costs between 224 and 252 bytes per live producer
// once grown; MemoryBytes reports it. The
// default InitialCapacity (1024 producers) costs 236 KB per partition.
//
// A PID's hash is xxhash64 of its 8 little-endian bytes: the top bits pick
// the shard, the low 32 bits, scaled to the array's length, the home slot;
// collisions probe linearly. PIDs are >= 0 (Kafka's -1 means "no producer").
//
// # Protocol
//
// All shared words are accessed with sync/atomic, whose operations are
// sequentially consistent (one total order that every goroutine observes).
//
// Probe: load keys from the home slot on; an empty slot ends the probe (the
// pid is absent). A removed entry stays in its slot as dead (lock word 3,
// terminal) until the next resize, and is skipped: a pid may have a dead
// entry and, further along, a live one.
//
// Claim: at an empty slot, take the slot's lock word (CAS 0 -> 1), then CAS
// the key 0 -> pid+1. The entry is born locked by its creator, so Acquire's
// "created" is exact: nobody else holds or changes the entry before its
// creator releases it. A prober that finds an empty slot locked (a claim in
// progress) waits for it and re-reads the slot, which may now hold its own
// pid. If the key CAS fails, the slot was sealed by a resizer (unlock it,
// wait for the new table) or another claimer took it and released it
// between the read of the empty key and the lock CAS, which then locked
// that live entry (keep it if it is the pid's, else hand it back at once
// and re-read the slot). Slots never go back to empty within a table, every
// prober starts at the home slot and none passes an empty slot, so a pid
// has at most one live entry: a claimer passes a slot only if it read
// another pid's key or a dead entry of its own pid there, and dead is
// terminal. A claim first reserves room in the table (a counter of claimed
// slots kept at most 3/4 of the array), so an empty slot always ends a
// probe; when the reservation fails, the claimer resizes.
//
// Lock: CAS the entry's lock word 0 -> 1; Release stores 0. A waiter spins a
// few times, then yields with runtime.Gosched, and after a few hundred
// yields (a holder waiting on I/O) sleeps 20µs between tries. It is a per-producer lock:
// only callers for the same PID contend on it (and, for an instant, a
// resizer or a sweeper), and holders keep it for a check, a short append and
// an update. A waiter that finds 2 (moved) reloads the shard's table and
// retries there; one that finds 3 (dead) goes on probing, and claims a new
// entry if none follows. The CAS that takes the lock reads the value stored
// by the previous Release, so every State write of the previous holder is
// visible to the next one.
//
// # Growth
//
// Growth (load above 3/4) and compaction (dead entries) are copy-on-write
// per shard; nothing else ever blocks on another producer. The resizer
//
//  1. wins a CAS of the old table's frozen flag (others wait for the new
//     table to be published);
//  2. allocates a table sized for the live entries at load 2/3, private to
//     it;
//  3. for every slot of the old table: an empty slot is sealed, by CAS of its
//     key 0 -> keySealed (all ones, never a pid+1); a claimed slot is locked
//     (CAS 0 -> 1, waiting for a holder to release), its key and State are
//     copied into the new table, and its lock word is set to 2 (moved); a
//     dead slot is skipped;
//  4. publishes the new table with an atomic pointer store.
//
// The ordering argument. (a) A claim and a seal of the same slot are CASes
// of the same key word from 0: exactly one wins. If the claim wins, the
// resizer's seal fails, it re-reads the key, waits for the creator's
// Release and copies the entry; if the seal wins, the claimer's key CAS
// fails, it unlocks the sealed slot and waits for the new table. So a
// claim is never lost, and none is stranded in the old table; the claimer
// needs no second look at frozen after its CAS. (The design brief's
// variant, "claim, then re-check frozen and redo the Acquire in the new
// table if set", is right for the claimer itself by the total order: a
// frozen flag read as clear after the claim was set, and the slot read by
// the resizer, later. But a claim made after the resizer passed its slot is
// stranded in the old table, where another goroutine could find it, lock
// it and lose its update, and the claimer cannot tell whether its claim was
// copied, which makes "created" and the count ambiguous. Sealing removes
// both problems.) (b) A holder's State writes are ordered before its Release
// store, which the resizer's lock CAS reads, so the copy holds them; after
// the copy the old lock word is 2 forever, so nobody writes the old State
// again. (c) The new table is written only before its publication, whose
// atomic store/load pair orders those writes before any use of it. (d)
// While a caller holds an entry, no resize of its shard can complete, so
// the shard's current table is the entry's own (Remove relies on it).
//
// Consequences: a resize waits for the entries of its shard held at the
// time, so a goroutine must not Acquire while it holds another entry of the
// same Table (the resizer would wait for it forever), nor call Acquire or
// Sweep while holding a mutex that an entry's holder may wait for (idemlog's
// append path holds an entry while it takes the partition's writer mutex,
// so neither may run under that mutex; Range and Lookup may). Sweep
// compacts only shards in which it met no held entry, so it may be called
// while holding entries.
//
// Lookup and TryAcquire never wait: they treat a sealed slot or a moved
// entry in a table that is still current as "in the old state" (sealed:
// absent; moved: present but unavailable to TryAcquire), and restart on the
// new table once it is published.
//
// # The Range rule
//
// Range visits every live entry WITHOUT taking the entries' locks. The
// caller must guarantee that no goroutine writes any State of the table
// meanwhile, and fn must only read: idemlog calls it under the partition's
// writer mutex, the only place States are written. This is sound because
// nothing else writes a State: a claim writes only the key and the lock
// word, Release and Remove only the lock word, and a resizer only reads old
// States and writes into a table that is not yet published. Concurrent claims, removals and
// resizes are fine; an entry created meanwhile may or may not be visited
// (with its zero State), and no entry is visited twice.
//
// # Expiry
//
// Sweep visits the entries it can lock without waiting, removes those its
// callback rejects (Kafka's producer expiry, §2.5) and compacts shards whose
// dead entries outnumber the live ones.
package pidtable
