package pidtable

import (
	"math/bits"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/idemlog/idemlog/errcode"
)

// ErrTooManyProducers is returned by Acquire when a new producer would take
// the table past Options.MaxEntries. Kafka has no limit of this kind, so no
// Kafka error code names it. It carries THROTTLING_QUOTA_EXCEEDED (89), the
// code of a broker limit that frees with time (KIP-599; KIP-936 proposes a
// quota on new producer ids, the same refusal): clients retry it (Java's
// ThrottlingQuotaExceededException and franz-go's kerr mark it retriable),
// and a retried batch keeps its sequence, so an idempotent producer goes on
// without a gap once room frees, or fails after its delivery timeout.
// UNKNOWN_SERVER_ERROR told the client nothing; a non-retriable code
// (POLICY_VIOLATION) would fail every batch at once although the refusal
// ends by itself.
var ErrTooManyProducers = errcode.New(errcode.ThrottlingQuotaExceeded, "pidtable: too many producers in the partition")

// ErrInvalidPID is returned by Acquire for a negative producer id: Kafka's
// batches without a producer carry -1 and must not reach the table.
var ErrInvalidPID = errcode.New(errcode.UnknownServerError, "pidtable: negative producer id")

// Lock-word values of an Entry.
const (
	lockFree  uint32 = 0 // live, unlocked
	lockHeld  uint32 = 1 // locked by a caller, a sweeper or a resizer (or, on an empty slot, a claimer)
	lockMoved uint32 = 2 // copied into the shard's next table (terminal)
	lockDead  uint32 = 3 // removed (terminal); the slot stays claimed until a resize drops it
)

// keySealed fills an empty slot of a table under resize so that nothing can
// be claimed there any more. Keys are pid+1 for pid >= 0, so they never
// exceed 1<<63 and cannot collide with it.
const keySealed = ^uint64(0)

// Waiting: a waiter re-reads the word spinTries times, then yields with
// runtime.Gosched, and after yieldTries yields sleeps napTime between
// reads. Holders keep entries for a check and a short update, and a shard's
// resize is short, so the sleeps only start when a holder waits on I/O.
const (
	spinTries  = 8
	yieldTries = 256
	napTime    = 20 * time.Microsecond
)

// Entry is one slot of a table: the key, the lock word and the producer's
// State, inline in the table's array. Entries are handed out locked by
// Acquire and TryAcquire and must be handed back with Release or Remove.
type Entry struct {
	key   atomic.Uint64 // pid+1; 0 = empty slot; keySealed = sealed by a resizer
	lock  atomic.Uint32 // lockFree, lockHeld, lockMoved or lockDead
	state State
}

// EntrySize is the size of one slot in bytes (key, lock word, State and
// alignment padding).
const EntrySize = int(unsafe.Sizeof(Entry{}))

// PID is the entry's producer id.
func (e *Entry) PID() int64 { return int64(e.key.Load() - 1) }

// State is the producer's state. It may be read and written only while the
// caller holds the entry (between Acquire or TryAcquire and Release or
// Remove); see Table.Range for the one exception.
func (e *Entry) State() *State { return &e.state }

// table is one generation of a shard's open-addressing array. Tables only
// ever go from live to frozen (resize in progress) to replaced; a replaced
// table stays valid memory for whoever still holds a pointer into it.
type table struct {
	entries []Entry
	limit   int64        // most claimed slots allowed: 3/4 of len(entries), always < len(entries)
	used    atomic.Int64 // claimed slots, dead ones included, plus in-flight reservations
	live    atomic.Int64 // live entries (approximate while frozen; only sizes the next table)
	frozen  atomic.Bool  // set once by the one resizer that copies this table
}

func newTable(slots int) *table {
	return &table{entries: make([]Entry, slots), limit: int64(slots) * 3 / 4}
}

// slotsFor is the size of a table that holds n entries at load factor 2/3,
// so that it grows by an eighth before reaching the 3/4 limit. The load
// then stays between 2/3 and 3/4 once a shard has grown: at 168-byte
// slots, 224 to 252 bytes per live producer (the bound is 256).
// Doubling (load 1/2 after a resize) left tables between 1/2 and 3/4
// full: up to 336 bytes per producer (304 measured at 100k). The price is
// more resizes while a shard grows (each copies the shard, amortized 8
// copies per insert, inserts being new producers only) and about one more
// probe in five on lookups (linear probing: 1.5-2 probes per hit at these
// loads against 1.3-2).
func slotsFor(n int64, minSlots int) int {
	s := int(n)*3/2 + 1
	return max(s, minSlots)
}

// home is the first slot of h's probe sequence: the low 32 bits of the hash
// scaled to the table size (multiply-shift; no power-of-two sizes needed).
func home(h uint64, n int) int { return int(uint64(uint32(h)) * uint64(n) >> 32) }

// shard holds the current table of one shard, alone on its cache line.
type shard struct {
	table atomic.Pointer[table]
	_     [56]byte
}

// Options configure a Table.
type Options struct {
	// Shards is the number of independently resized tables: a power of two
	// (rounded up otherwise), default 64.
	Shards int
	// InitialCapacity is how many producers the table holds, spread over
	// the shards, before any shard grows. Default 1024.
	InitialCapacity int
	// MaxEntries caps the live entries; 0 means unlimited. Claims in
	// flight count while they run, so near the cap a concurrent creation
	// may be refused a little early.
	MaxEntries int
}

// Table is one partition's producer-state table. See the package doc for
// the protocol.
type Table struct {
	shards   []shard
	shift    uint // shard = hash >> shift
	minSlots int  // per shard
	max      int64
	_        [64]byte     // keep count off the line of the read-mostly fields
	count    atomic.Int64 // live entries plus in-flight reservations
	_        [56]byte
}

// New returns an empty table.
func New(opts Options) *Table {
	n := opts.Shards
	if n <= 0 {
		n = 64
	}
	n = 1 << bits.Len(uint(n-1)) // round up to a power of two
	c := opts.InitialCapacity
	if c <= 0 {
		c = 1024
	}
	per := (c + n - 1) / n
	t := &Table{
		shards:   make([]shard, n),
		shift:    uint(64 - bits.TrailingZeros(uint(n))),
		minSlots: max(8, (per*4+2)/3),
		max:      int64(max(opts.MaxEntries, 0)),
	}
	for i := range t.shards {
		t.shards[i].table.Store(newTable(t.minSlots))
	}
	return t
}

// SetMaxEntries changes the cap on live entries (Options.MaxEntries). Only
// before the table is shared: a partition loads its producers uncapped,
// since a rebuild from the log must not refuse what the log holds (Kafka's
// never does), and caps new ones afterwards. A table loaded above the cap
// refuses new producers until expiry brings it below.
func (t *Table) SetMaxEntries(n int) { t.max = int64(max(n, 0)) }

// hashPID is xxhash64 (seed 0) of pid's 8 little-endian bytes, unrolled for
// exactly that input (identical to xxhash.Sum64; a test checks it).
func hashPID(pid int64) uint64 {
	const (
		prime1 uint64 = 11400714785074694791
		prime2 uint64 = 14029467366897019727
		prime3 uint64 = 1609587929392839161
		prime4 uint64 = 9650029242287828579
		prime5 uint64 = 2870177450012600261
	)
	k := bits.RotateLeft64(uint64(pid)*prime2, 31) * prime1
	h := (prime5 + 8) ^ k
	h = bits.RotateLeft64(h, 27)*prime1 + prime4
	h ^= h >> 33
	h *= prime2
	h ^= h >> 29
	h *= prime3
	h ^= h >> 32
	return h
}

func (t *Table) shardOf(h uint64) *shard { return &t.shards[h>>t.shift] }

func backoff(spin int) {
	switch {
	case spin < spinTries:
	case spin < spinTries+yieldTries:
		runtime.Gosched()
	default:
		time.Sleep(napTime)
	}
}

// waitPublish waits until the resizer of old publishes its successor. The
// wait is bounded by one shard's copy (plus the hold times of the entries it
// must lock).
func waitPublish(sh *shard, old *table) {
	for spin := 0; sh.table.Load() == old; spin++ {
		backoff(spin)
	}
}

// lockEntry locks a claimed entry: it returns lockHeld once this goroutine
// holds it, or the terminal lockMoved / lockDead it found instead.
//
// This is a per-producer lock: only callers of the same pid (and, briefly, a
// resizer or a sweeper) ever wait on it, so the append path keeps its rule
// that no mutex is shared by different producers.
func lockEntry(e *Entry) uint32 {
	for spin := 0; ; spin++ {
		switch l := e.lock.Load(); l {
		case lockFree:
			if e.lock.CompareAndSwap(lockFree, lockHeld) {
				return lockHeld
			}
			continue // lost a race: re-read at once
		case lockHeld:
			backoff(spin)
		default:
			return l
		}
	}
}

type outcome uint8

const (
	gotIt   outcome = iota
	moved           // the table is being replaced: wait for the next one
	grow            // no room: resize the table
	tooMany         // MaxEntries reached
)

// Acquire returns pid's entry locked by the caller, creating an empty one
// (zero State) if absent; created reports that it was absent, and then the
// caller is the first to hold the entry. It fails with
// ErrTooManyProducers if a new entry would exceed MaxEntries, and with
// ErrInvalidPID for pid < 0.
//
// Acquire may have to resize the pid's shard, which waits for the entries
// of the shard held at the time. So a goroutine must not call it while it
// holds another entry of the same Table, nor while it holds anything (a
// mutex) that a holder of an entry may be waiting for.
func (t *Table) Acquire(pid int64) (e *Entry, created bool, err error) {
	if pid < 0 {
		return nil, false, ErrInvalidPID
	}
	h := hashPID(pid)
	sh := t.shardOf(h)
	key := uint64(pid) + 1
	for {
		tb := sh.table.Load()
		e, created, out := t.acquireIn(tb, key, h)
		switch out {
		case gotIt:
			return e, created, nil
		case tooMany:
			return nil, false, ErrTooManyProducers
		case grow:
			t.resize(sh, tb)
		case moved:
			waitPublish(sh, tb)
		}
	}
}

// acquireIn runs one probe of tb for key.
//
// Claims: an empty slot is claimed born locked. The claimer first takes the
// empty slot's lock word (CAS 0 -> 1), then CASes its key 0 -> pid+1; these
// two words are all a claim writes (the State is already the zero value).
// Holding the lock across the key CAS means that whoever finds the new key
// waits for the claimer, so "created" is exact: nobody else holds or
// changes the entry before its creator. A prober that finds an empty slot
// locked waits for that claim to resolve and re-reads the slot.
//
// At most one live entry per pid: slots only ever go empty -> claimed (or
// empty -> sealed) within a table, every prober starts at the home slot,
// and a prober passes a slot only after reading it claimed by another pid,
// or dead (terminal) for its own; an empty slot it never passes, so of two
// claimers of the same pid the one further along would have had to pass the
// other's slot while it was empty.
func (t *Table) acquireIn(tb *table, key, h uint64) (*Entry, bool, outcome) {
	n := len(tb.entries)
	i := home(h, n)
	for probes, spin := 0, 0; probes < n; {
		e := &tb.entries[i]
		switch k := e.key.Load(); k {
		case 0:
			// The slot's lock first: a claim of it in progress, maybe of
			// our own pid, is waited for before anything is reserved, so
			// a concurrent creation of the same pid is never counted
			// against MaxEntries (only one of them takes a slot). (Without
			// this: with MaxEntries 1, two Acquires of one new pid got
			// one refusal.)
			if !e.lock.CompareAndSwap(lockFree, lockHeld) {
				// Another claimer is taking this slot: wait for the
				// outcome and re-read it (it may be our pid).
				backoff(spin)
				spin++
				continue
			}
			// A claim may have completed and released the slot between
			// our read of its key and our lock CAS: the lock we took is
			// then a live entry's (acquireIn's CAS-failure path below has
			// the cases).
			switch k := e.key.Load(); k {
			case 0:
			case keySealed:
				e.lock.Store(lockFree)
				return nil, false, moved
			case key:
				return e, false, gotIt // our pid, and we hold it
			default:
				e.lock.Store(lockFree) // another pid's: hand it back
				continue               // and go on from this slot
			}
			// Then room, so that a table can never fill up: used <=
			// limit < len keeps an empty (or sealed) slot in every probe
			// sequence, which ends every probe. A failed reservation
			// hands the empty slot's lock back: probers waiting on it
			// re-read an empty slot.
			if tb.used.Add(1) > tb.limit {
				tb.used.Add(-1)
				e.lock.Store(lockFree)
				return nil, false, grow
			}
			if !e.key.CompareAndSwap(0, key) {
				tb.used.Add(-1)
				// Either a resizer sealed the slot, or another claimer
				// took it and released it between our read of the key
				// and our lock CAS, which then locked its live entry.
				switch k := e.key.Load(); k {
				case keySealed:
					e.lock.Store(lockFree)
					return nil, false, moved
				case key:
					return e, false, gotIt // our pid, and we hold it
				}
				e.lock.Store(lockFree) // another pid's: hand it back
				continue               // and go on from this slot
			}
			// No re-check of tb.frozen is needed: a resizer seals every
			// empty slot with a CAS of its key before it copies, so this
			// CAS having succeeded means the resizer, if any, has not
			// reached the slot; it will find the key, wait for our
			// Release and copy the entry. (Package doc, "Growth".)
			//
			// The cap is counted only now: a count taken before the key
			// CAS could outlive its table, a resizer sealing the empty
			// slot meanwhile without waiting for us, and refuse every
			// claim in the new table, even of this pid, until we ran
			// again. From here the resizer waits for our lock, so the
			// count is settled before the entry can move. A refused
			// claim leaves its slot dead, like a Remove, for the next
			// resize to drop.
			if c := t.count.Add(1); t.max > 0 && c > t.max {
				t.count.Add(-1)
				e.lock.Store(lockDead)
				return nil, false, tooMany
			}
			tb.live.Add(1)
			return e, true, gotIt
		case key:
			switch lockEntry(e) {
			case lockHeld:
				return e, false, gotIt
			case lockMoved:
				return nil, false, moved
			}
			// lockDead: a removed incarnation; a live one may follow.
		case keySealed:
			return nil, false, moved
		}
		if i++; i == n {
			i = 0
		}
		probes++
	}
	return nil, false, grow // unreachable while used <= limit < len
}

// Release unlocks an entry obtained from Acquire or TryAcquire.
func (t *Table) Release(e *Entry) {
	if e.lock.Load() != lockHeld {
		panic("pidtable: Release of an entry not held")
	}
	// The atomic store publishes the holder's State writes to the next
	// locker, whose CAS reads this value (sync/atomic is sequentially
	// consistent, and the race detector models it as release/acquire).
	e.lock.Store(lockFree)
}

// Remove deletes a held entry: it becomes dead (terminal) and is released.
// Its slot is reclaimed by the shard's next resize.
func (t *Table) Remove(e *Entry) {
	if e.lock.Load() != lockHeld {
		panic("pidtable: Remove of an entry not held")
	}
	// While e is held no resizer can finish copying its table (it must
	// lock e first), so e's table is its shard's current one.
	t.shardOf(hashPID(e.PID())).table.Load().live.Add(-1)
	t.count.Add(-1)
	e.lock.Store(lockDead)
}

// TryAcquire returns pid's entry locked by the caller if it exists and no
// one else holds it. It never creates an entry and never waits: an entry
// held by another goroutine, or being moved by a resize, is reported absent.
func (t *Table) TryAcquire(pid int64) (*Entry, bool) {
	if pid < 0 {
		return nil, false
	}
	h := hashPID(pid)
	sh := t.shardOf(h)
	key := uint64(pid) + 1
retry:
	for {
		tb := sh.table.Load()
		n := len(tb.entries)
		i := home(h, n)
		for probes := 0; probes < n; probes++ {
			e := &tb.entries[i]
			switch k := e.key.Load(); k {
			case 0:
				return nil, false
			case keySealed:
				if sh.table.Load() != tb {
					continue retry
				}
				return nil, false
			case key:
				for {
					l := e.lock.Load()
					if l == lockFree {
						if e.lock.CompareAndSwap(lockFree, lockHeld) {
							return e, true
						}
						continue
					}
					if l == lockHeld {
						return nil, false
					}
					if l == lockMoved {
						if sh.table.Load() != tb {
							continue retry
						}
						return nil, false
					}
					break // dead: keep probing
				}
			}
			if i++; i == n {
				i = 0
			}
		}
		return nil, false
	}
}

// Lookup reports whether pid has a live entry. It takes no lock and writes
// no shared memory: it only loads keys, lock words and the shard's table
// pointer.
func (t *Table) Lookup(pid int64) bool {
	if pid < 0 {
		return false
	}
	h := hashPID(pid)
	sh := t.shardOf(h)
	key := uint64(pid) + 1
retry:
	for {
		tb := sh.table.Load()
		n := len(tb.entries)
		i := home(h, n)
		for probes := 0; probes < n; probes++ {
			e := &tb.entries[i]
			switch k := e.key.Load(); k {
			case 0:
				// An empty slot ends the probe. A resizer seals every
				// empty slot before it publishes, so tb was current when
				// this was read, and pid was absent then.
				return false
			case keySealed:
				// Sealed: pid cannot lie further along (a claim would
				// have stopped here). If tb is still current the new
				// table is unpublished and holds only copies: absent.
				if sh.table.Load() != tb {
					continue retry
				}
				return false
			case key:
				switch e.lock.Load() {
				case lockDead:
				case lockMoved:
					// Copied into the unpublished successor if tb is
					// still current: present. Otherwise ask the new one.
					if sh.table.Load() != tb {
						continue retry
					}
					return true
				default:
					return true
				}
			}
			if i++; i == n {
				i = 0
			}
		}
		return false
	}
}

// resize replaces tb, the current table of sh, by a copy holding only its
// live entries, sized for them at load factor 2/3 (slotsFor; growth or
// compaction).
// If another goroutine already resizes tb, it waits for that one instead.
//
// Ordering: the resizer seals or locks every slot before it reads it, and
// publishes the new table with an atomic store after the last slot:
//   - an empty slot is sealed by CAS 0 -> keySealed. A claim's CAS 0 -> pid+1
//     and the seal are CASes on the same word: exactly one wins. A claim
//     that wins is seen by the resizer (its seal CAS fails, it re-reads the
//     key) and copied; a claim that loses sees keySealed and waits for the
//     new table. So no claim is lost and none is stranded in the old table.
//   - a claimed slot is locked (CAS lockFree -> lockHeld, waiting for a
//     holder to Release) and copied, then marked lockMoved. The CAS reads the
//     holder's Release store, so the copy sees every State write made under
//     the lock; once lockMoved, no one can lock it again in this table.
//   - dead slots are skipped.
//
// The new table is private until the pointer store, so filling it (State
// included) races with no one; the atomic store/load pair publishes it.
func (t *Table) resize(sh *shard, tb *table) {
	if !tb.frozen.CompareAndSwap(false, true) {
		waitPublish(sh, tb)
		return
	}
	nt := newTable(slotsFor(tb.live.Load(), t.minSlots))
	for i := range tb.entries {
		e := &tb.entries[i]
		for spin := 0; ; spin++ {
			k := e.key.Load()
			if k == 0 {
				if e.key.CompareAndSwap(0, keySealed) {
					break
				}
				continue // claimed under us: copy it
			}
			l := e.lock.Load()
			if l == lockDead {
				break
			}
			if l == lockFree && e.lock.CompareAndSwap(lockFree, lockHeld) {
				nt = nt.insertPrivate(k, &e.state, t.minSlots)
				e.lock.Store(lockMoved)
				break
			}
			backoff(spin) // held by a producer or a sweeper: released soon
		}
	}
	nt.live.Store(nt.used.Load())
	if invariants {
		if err := nt.verifyPrivate(); err != nil {
			panic("pidtable: resize built a bad table: " + err.Error())
		}
	}
	sh.table.Store(nt)
}

// insertPrivate copies (key, s) into nt, which no other goroutine can see
// yet, growing it (privately) if it fills up; it returns the table to keep
// filling.
func (nt *table) insertPrivate(key uint64, s *State, minSlots int) *table {
	if nt.used.Load() >= nt.limit {
		bigger := newTable(slotsFor(nt.used.Load()+1, minSlots))
		for i := range nt.entries {
			e := &nt.entries[i]
			if k := e.key.Load(); k != 0 {
				bigger.insertPrivate(k, &e.state, minSlots)
			}
		}
		nt = bigger
	}
	n := len(nt.entries)
	i := home(hashPID(int64(key-1)), n)
	for nt.entries[i].key.Load() != 0 {
		if i++; i == n {
			i = 0
		}
	}
	e := &nt.entries[i]
	e.key.Store(key)
	e.state = *s
	nt.used.Add(1)
	return nt
}

// Range calls fn for every live entry until fn returns false, WITHOUT
// locking the entries.
//
// The rule: the caller guarantees that no goroutine writes any State of the
// table while Range runs (idemlog calls it under the partition's writer
// mutex, the only place States are written), and fn only reads s. Claims,
// releases, removals and resizes may run concurrently: a claim writes only a
// key and a lock word, a removal only a lock word, and a resizer reads States and writes
// only into a table not yet published. An entry created concurrently may or
// may not be visited (with its zero State); no entry is visited twice, but
// a pid removed and claimed again while Range runs is a new entry, which
// may lie further along and be visited too, with its zero State
// : a caller that keys on pids must let that one win, or skip zero
// States as the engine's snapshot does.
func (t *Table) Range(fn func(pid int64, s *State) bool) {
	for si := range t.shards {
		tb := t.shards[si].table.Load()
		for i := range tb.entries {
			e := &tb.entries[i]
			k := e.key.Load()
			if k == 0 || k == keySealed || e.lock.Load() == lockDead {
				continue
			}
			// A lockMoved entry is still an exact copy: States are not
			// written (rule above), so the old table is as good as the new.
			if !fn(int64(k-1), &e.state) {
				return
			}
		}
	}
}

// Sweep calls fn on every live entry it can lock without waiting (entries
// held by someone else, or moved by a concurrent resize, are skipped until
// the next Sweep) and removes those for which fn returns false. fn runs with
// the entry held and must not call the Table. Sweep returns the number of
// entries removed. It compacts shards left mostly dead, except those where
// it met a held entry, so it may be called while holding entries; a
// compaction does wait for entries acquired after its pass, so, like
// Acquire, Sweep must not be called while holding a mutex that a holder of
// an entry may be waiting for.
func (t *Table) Sweep(fn func(pid int64, s *State) (keep bool)) int {
	removed := 0
	for si := range t.shards {
		sh := &t.shards[si]
		tb := sh.table.Load()
		skipped := false
		for i := range tb.entries {
			e := &tb.entries[i]
			k := e.key.Load()
			if k == 0 || k == keySealed {
				continue
			}
			if !e.lock.CompareAndSwap(lockFree, lockHeld) {
				skipped = skipped || e.lock.Load() == lockHeld
				continue
			}
			if fn(int64(k-1), &e.state) {
				e.lock.Store(lockFree)
				continue
			}
			tb.live.Add(-1)
			t.count.Add(-1)
			e.lock.Store(lockDead)
			removed++
		}
		// Dead slots lengthen probes and hold memory: compact a shard
		// whose dead outnumber the live and fill a quarter of it. Not if
		// an entry was held: it may be the caller's own, which the
		// resizer would wait for forever.
		live, used := tb.live.Load(), tb.used.Load()
		if dead := used - live; !skipped && dead > live && dead*4 >= int64(len(tb.entries)) && !tb.frozen.Load() {
			t.resize(sh, tb)
		}
	}
	return removed
}

// Len is the number of live entries (exact when no Acquire or Remove is in
// flight).
func (t *Table) Len() int { return int(t.count.Load()) }

// MemoryBytes is the size of all the shards' current arrays.
func (t *Table) MemoryBytes() int {
	n := 0
	for i := range t.shards {
		n += len(t.shards[i].table.Load().entries) * EntrySize
	}
	return n
}

// Reset drops every entry and shrinks the table back to its initial size.
// The caller guarantees that no other goroutine uses the table meanwhile,
// and that no entry obtained before is used after.
func (t *Table) Reset() {
	for i := range t.shards {
		t.shards[i].table.Store(newTable(t.minSlots))
	}
	t.count.Store(0)
}
