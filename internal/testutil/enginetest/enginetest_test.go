package enginetest

import (
	"errors"
	"testing"

	"github.com/idemlog/idemlog/engine"
)

// The engine Open returns is closed when the test ends: a second open of
// its directory, which the first holds locked, succeeds only after.
func TestOpenClosesAtCleanup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	t.Run("open", func(t *testing.T) {
		Open(t, dir, engine.Options{})
		if _, err := engine.Open(dir, engine.Options{}); err == nil {
			t.Fatal("a second engine opened the directory the first holds")
		}
	})
	e := Open(t, dir, engine.Options{})
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	// The cleanup's Close of an engine closed here is not an error.
	if err := e.Close(); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("second Close: %v, want ErrClosed", err)
	}
}
