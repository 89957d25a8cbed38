package main

import (
	"context"
	"testing"
)

// TestBenchLoopsApplyTheSameRows runs --bench small: both loops must
// apply every transfer (the throughput figures are not checked here).
func TestBenchLoopsApplyTheSameRows(t *testing.T) {
	res, err := bench(context.Background(), benchConfig{transfers: 300, runs: 1, maxBytes: 1024, partitions: 2, accounts: 10})
	if err != nil {
		t.Fatal(err)
	}
	if res.withPositions <= 0 || res.withoutPositions <= 0 || res.transactions < 2 {
		t.Fatalf("bench result %+v", res)
	}
}
