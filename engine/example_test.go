package engine_test

import (
	"fmt"
	"os"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/engine"
)

// An idempotent producer and a consumer that commits its position.
func Example() {
	dir, _ := os.MkdirTemp("", "idemlog-example")
	defer os.RemoveAll(dir)
	e, _ := engine.Open(dir, engine.Options{})
	defer e.Close()
	e.CreateTopic("orders", 1)
	p, _ := e.Partition("orders", 0)

	pr, _ := e.NewProducer()
	bld := batch.NewBuilder(batch.CodecNone)
	for _, v := range []string{"book", "lamp"} {
		bld.Reset(batch.CodecNone)
		bld.Append(time.Now().UnixMilli(), nil, []byte(v), nil)
		res, _ := pr.Send(p, bld)
		fmt.Println("written at", res.BaseOffset)
	}

	c := e.NewConsumer("billing", engine.ReadCommitted)
	c.Assign(p)
	c.Poll(p, 1<<20, func(r *batch.Record) error {
		fmt.Printf("read %d: %s\n", r.Offset, r.Value)
		return nil
	})
	c.Commit()
	// Output:
	// written at 0
	// written at 1
	// read 0: book
	// read 1: lamp
}

// Two partitions written in one transaction: read_committed consumers see
// the committed transaction and never the aborted one.
func ExampleTransactionalProducer() {
	dir, _ := os.MkdirTemp("", "idemlog-example")
	defer os.RemoveAll(dir)
	e, _ := engine.Open(dir, engine.Options{})
	defer e.Close()
	e.CreateTopic("ledger", 2)
	debit, _ := e.Partition("ledger", 0)
	credit, _ := e.Partition("ledger", 1)

	tp, _ := e.NewTransactionalProducer("transfers", time.Minute)
	send := func(p *engine.Partition, v string) {
		bld := batch.NewBuilder(batch.CodecNone)
		bld.Append(time.Now().UnixMilli(), nil, []byte(v), nil)
		tp.Send(p, bld)
	}
	send(debit, "-10 alice")
	send(credit, "+10 bob")
	tp.Commit()
	send(debit, "-99 mallory")
	tp.Abort()

	for _, p := range []*engine.Partition{debit, credit} {
		c := e.NewConsumer("", engine.ReadCommitted)
		c.Assign(p)
		c.Poll(p, 1<<20, func(r *batch.Record) error {
			fmt.Printf("partition %d: %s\n", p.Index(), r.Value)
			return nil
		})
	}
	// Output:
	// partition 0: -10 alice
	// partition 1: +10 bob
}
