//go:build !linux

package main

import (
	"fmt"
	"io"
)

// runVerify stands in where package segment, which maps files with Linux
// system calls, does not build, so that dump still does.
func runVerify(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "idemlog verify: only available on Linux")
	return exitFail
}
