// Package powercut is the power-cut harness: it runs a workload on the
// engine's public API (and `idemlog serve` under a franz-go pipeline) on a
// lazyfs mount, kills the process at a random moment, cuts the power (the
// disk forgets everything not synced), reopens and checks what survived
// against everything that was acknowledged, per sync policy.
//
// The workload, the recovery and the checker run in child processes of
// the test binary (TestPowerCutChild, TestPowerCutServeChild) and report
// on stdout, one line per event (Workload and Check list the lines). The
// parent keeps a Ledger of the acknowledgements and counts, per failure
// class, what each check finds; Promises says which classes each policy
// must keep at zero. docs/DURABILITY.md states the promises and how to
// run a campaign.
//
// It is a module of its own so that go-fuse stays out of the main module.
package powercut
