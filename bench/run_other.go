//go:build !linux

package bench

import (
	"context"
	"errors"
	"io"
)

// syncPolicy stands in for partition.SyncPolicy, which needs Linux.
type syncPolicy struct{}

func parseSync(string) (syncPolicy, error) { return syncPolicy{}, nil }

// Run needs the engine, which maps files with Linux system calls.
func Run(ctx context.Context, c Config, progress io.Writer) (*Result, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return nil, errors.New("bench is only available on Linux")
}
