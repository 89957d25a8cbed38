// Package pidtablecompare holds benchmarks only: the append path's
// per-producer work (lock the producer's state, check the newest cached
// batch, push the next, unlock) on pidtable.Table, on
// xsync.Map[int64, *State] and on sync.Map, side by side, with 100k and 1M
// live producers:
//
//	cd bench/pidtable-compare && go test -bench . -benchmem
//
// Variants:
//   - pidtable: Acquire + update + Release; states inline in the table.
//   - xsync-compute: Compute on xsync.Map[int64, *pidtable.State], updating
//     the state in place under the bucket lock and returning CancelOp (an
//     UpdateOp would allocate a new map entry per call).
//   - xsync-load-mutex: Load of a *struct{sync.Mutex; pidtable.State}, then
//     the value's own mutex around the update.
//   - syncmap-load-mutex: the same on sync.Map.
//
// cpu-ns/op is the process's CPU time (user + system, GC included) per
// operation, which a busy shared machine disturbs much less than ns/op; in
// parallel runs it adds up both goroutines' time.
//
// B/entry is the live heap the structure adds per producer (states
// included), measured with runtime.ReadMemStats after a GC; for pidtable it
// equals MemoryBytes()/Len(). GC-ms (serial runs) is the wall time of one
// forced full GC with the structure live: what its pointers add to every GC
// cycle of the process (pidtable's arrays hold none).
package pidtablecompare
