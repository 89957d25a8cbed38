//go:build invariants || race

package mmap

// Invariants reports whether Unmap keeps released ranges inaccessible
// instead of returning them to the kernel. It is on under the "invariants"
// build tag and under -race, since those are the builds that tests run.
const Invariants = true
