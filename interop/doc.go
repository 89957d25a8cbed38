// Package interop holds no production code: its tests cross-check idemlog's
// batch encoding against franz-go, an independent Kafka client, byte for byte
// and field for field, in both directions and for every codec.
//
// It is a separate module so that franz-go never becomes a dependency of the
// engine itself: only this module's go.mod names it, and it reaches the engine
// through a replace directive pointing at the working tree.
//
// Run with: cd interop && go test -race ./...
package interop
