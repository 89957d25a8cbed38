package main

import (
	"os"
	"strings"
	"testing"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/engine"
)

// TestPipelineFewOrders: with 50 orders or fewer (the flag takes
// any count) the example reports "the zombie instance was not fenced",
// though the fence works: the zombie's attempt finds no input left after
// the first two transactions, so it returns before any Send and never
// meets the fence.
func TestPipelineFewOrders(t *testing.T) {
	for _, n := range []int{1, 50} {
		if err := run(t.TempDir(), n, os.Stdout); err != nil {
			t.Errorf("--orders %d: %v", n, err)
		}
	}
}

// TestPipelineReusedDir: a second run over the same --dir appends
// and processes its new orders exactly once (the log holds one invoice
// per order), yet the example reports an exactly-once failure: it compares
// every invoice in the log against this run's order count.
func TestPipelineReusedDir(t *testing.T) {
	dir := t.TempDir()
	if err := run(dir, 200, os.Stdout); err != nil {
		t.Fatal(err)
	}
	err := run(dir, 200, os.Stdout)
	// Exactly once held in the log: orders and invoices match one to one.
	e, oerr := engine.Open(dir, engine.Options{})
	if oerr != nil {
		t.Fatal(oerr)
	}
	defer e.Close()
	count := func(topic string) int {
		p, _ := e.Partition(topic, 0)
		c := e.NewConsumer("", engine.ReadCommitted)
		c.Assign(p)
		n := 0
		for c.Position(p) < p.LastStableOffset() {
			k, perr := c.Poll(p, 1<<20, func(*batch.Record) error { return nil })
			if perr != nil {
				t.Fatal(perr)
			}
			n += k
		}
		return n
	}
	orders, invoices := count("orders"), count("invoices")
	t.Logf("second run: %v; log: %d orders, %d invoices", err, orders, invoices)
	if orders == invoices && err != nil && strings.Contains(err.Error(), "invoices for") {
		t.Fatalf("second run over the same --dir reports a false exactly-once failure (%v): the log holds %d orders and %d invoices", err, orders, invoices)
	}
}
