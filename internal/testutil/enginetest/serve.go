package enginetest

import (
	"testing"

	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Serve opens dir's engine, serves it in-process through the Kafka
// listener, and runs f with the client options that reach it (seed and
// dialer); the listener and the engine are closed when f returns, so that
// the test can open the directory again (a mirror, the command).
func Serve(t testing.TB, dir string, f func(e *engine.Engine, opts ...kgo.Opt)) {
	t.Helper()
	e, err := engine.Open(dir, engine.Options{})
	if err != nil {
		t.Fatalf("cannot open engine on %s: %v", dir, err)
	}
	defer e.Close()
	srv, err := kafka.New(e, kafka.Options{})
	if err != nil {
		t.Fatalf("cannot serve engine on %s: %v", dir, err)
	}
	defer srv.Close()
	f(e, kgo.SeedBrokers("idemlog"), kgo.Dialer(srv.Dial))
}
