// Package sysstat reads what explains a benchmark's figure besides its
// wall time: the process's CPU time (getrusage) and the bytes the block
// device under a directory has written (/sys/dev/block). It is shared by
// `idemlog bench` and the bench/peers module, so that both count the same
// way.
package sysstat
