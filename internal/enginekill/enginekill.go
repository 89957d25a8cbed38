// Package enginekill stops an engine as a crash would, for crash tests
// outside package engine that reopen a data directory in the same process.
// It is a test's tool, kept out of the embedding API: an embedding program
// ends an engine with Close, and a crash is a crash.
//
// Package engine registers the function at init; this package cannot
// import engine (engine imports it), hence the untyped argument.
package enginekill

var kill func(e any)

// Register is called by package engine's init.
func Register(f func(e any)) { kill = f }

// Kill stops every partition of e (an *engine.Engine) as a crash would:
// nothing is flushed, no clean-shutdown marker is written, and the data
// dir's lock is released, as a process's end releases it.
func Kill(e any) {
	if kill == nil {
		panic("BUG: enginekill.Kill before package engine registered it")
	}
	kill(e)
}
