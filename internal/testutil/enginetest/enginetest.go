// Package enginetest opens engines for the tests of the packages above
// kafka (sink, mirror, the command, interop): one opener that closes what
// it opened, and Serve, an engine served in-process through the Kafka
// listener. It is apart from testutil because it imports engine and
// kafka, which their own tests (and partition's) cannot import.
package enginetest

import (
	"errors"
	"testing"

	"github.com/idemlog/idemlog/engine"
)

// Open opens an engine on dir (a new temporary directory when dir is "")
// with opts, failing the test if it cannot, and closes it when the test
// ends: a Close that fails, other than on an engine the test closed
// itself, fails the test.
func Open(t testing.TB, dir string, opts engine.Options) *engine.Engine {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	e, err := engine.Open(dir, opts)
	if err != nil {
		t.Fatalf("cannot open engine on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil && !errors.Is(err, engine.ErrClosed) {
			t.Errorf("cannot close engine on %s: %v", dir, err)
		}
	})
	return e
}
