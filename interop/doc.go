// Package interop holds no production code: its tests cross-check idemlog's
// batch encoding against franz-go, an independent Kafka client, byte for byte
// and field for field, in both directions and for every codec. It also
// holds a sink.Source over a Kafka-protocol broker through franz-go's kgo
// (sinksource_test.go), run against the Kafka listener.
//
// It is a separate module so that franz-go never becomes a dependency of the
// engine itself: only this module's go.mod names it, and it reaches the engine
// through a replace directive pointing at the working tree.
//
// Run with: cd interop && go test -race ./...
package interop
