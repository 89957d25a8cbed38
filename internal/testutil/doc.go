// Package testutil is the test kit the packages' tests share (as bbolt's
// internal/btesting): Batch builds a record batch from a BatchSpec, and
// StartChild and Reporter run a crash test's child process (the test
// binary again, reporting its acknowledgements over a pipe) for the
// parent to SIGKILL. It imports nothing of idemlog but package batch, so
// that every package's internal tests can use it; the engine opener,
// which imports engine, is in the subpackage enginetest.
package testutil
