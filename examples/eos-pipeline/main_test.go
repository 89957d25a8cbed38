package main

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/engine"
)

func TestPipeline(t *testing.T) {
	if err := run(t.TempDir(), 300, os.Stdout); err != nil {
		t.Fatal(err)
	}
}

// TestPipelineAfterCrashedRun: an earlier run over the same --dir
// died after producing its orders and before processing them (the case
// the package doc promises: "after any crash ... each order yields
// exactly one visible invoice"). The next run processes the leftover
// orders too, exactly once (the log ends with one invoice per order), but
// run compares the invoices it added with the orders it produced itself
// and reports an exactly-once failure.
func TestPipelineAfterCrashedRun(t *testing.T) {
	dir := t.TempDir()
	e, err := engine.Open(dir, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range []string{"orders", "invoices"} {
		if err := e.CreateTopic(tp, 1); err != nil {
			t.Fatal(err)
		}
	}
	in, _ := e.Partition("orders", 0)
	pr, err := e.NewProducer()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		bld := batch.NewBuilder(batch.CodecNone)
		bld.Append(time.Now().UnixMilli(), nil, fmt.Appendf(nil, "crashed-run-order-%d", i), nil)
		if _, err := pr.Send(in, bld); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Close(); err != nil { // the run dies here, before processing
		t.Fatal(err)
	}

	runErr := run(dir, 100, os.Stdout)

	e, err = engine.Open(dir, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	count := func(topic string) int {
		p, _ := e.Partition(topic, 0)
		n, err := countVisible(e, p)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	orders, invoices := count("orders"), count("invoices")
	if orders != invoices {
		t.Fatalf("exactly-once broken in the log: %d orders, %d invoices (run: %v)", orders, invoices, runErr)
	}
	if runErr != nil && strings.Contains(runErr.Error(), "invoices for") {
		t.Fatalf("run after a crashed run reports %q, though the log holds %d orders and %d invoices, one per order", runErr, orders, invoices)
	}
}
