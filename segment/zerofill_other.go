//go:build !linux

package segment

import (
	"errors"
	"os"
)

// ZeroFillSupported reports whether ReserveZeroFill can zero-fill here.
const ZeroFillSupported = false

// zeroFill is Linux-only (sync_file_range); elsewhere reservations fall
// back to fallocate.
func zeroFill(*os.File, int64, int64) error { return errors.ErrUnsupported }

// fillFile: see zeroFill.
func fillFile(*os.File) (*os.File, error) { return nil, errors.ErrUnsupported }
