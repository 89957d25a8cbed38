//go:build invariants || race

package pidtable

// invariants turns on the checks of every table a resize builds (builds
// with -race or -tags invariants).
const invariants = true
