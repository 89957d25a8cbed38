//go:build !invariants && !race

package pidtable

const invariants = false
