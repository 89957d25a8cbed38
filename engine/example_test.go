package engine_test

import (
	"fmt"
	"os"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/engine"
)

// An idempotent producer writes; a consumer reads in order and commits its
// group's position.
func Example() {
	dir, _ := os.MkdirTemp("", "idemlog-example")
	defer os.RemoveAll(dir)
	e, _ := engine.Open(dir, engine.Options{Sync: engine.SyncAlways})
	defer e.Close()
	e.CreateTopic("orders", 1)
	p, _ := e.Partition("orders", 0)

	pr, _ := e.NewProducer()
	bld := batch.NewBuilder(batch.CodecNone)
	for _, v := range []string{"book", "lamp"} {
		bld.Append(time.Now().UnixMilli(), nil, []byte(v), nil)
		res, _ := pr.Send(p, bld) // clears bld once written
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

// A consumer resumes from its group's committed position: the second one
// reads only what came after the first one's Commit.
func ExampleConsumer_Poll() {
	dir, _ := os.MkdirTemp("", "idemlog-example")
	defer os.RemoveAll(dir)
	e, _ := engine.Open(dir, engine.Options{})
	defer e.Close()
	e.CreateTopic("events", 1)
	p, _ := e.Partition("events", 0)
	pr, _ := e.NewProducer()
	send := func(v string) {
		bld := batch.NewBuilder(batch.CodecNone)
		bld.Append(time.Now().UnixMilli(), nil, []byte(v), nil)
		pr.Send(p, bld)
	}
	poll := func(c *engine.Consumer) {
		c.Poll(p, 1<<20, func(r *batch.Record) error {
			fmt.Printf("%d: %s\n", r.Offset, r.Value)
			return nil
		})
	}

	send("signup")
	first := e.NewConsumer("mailer", engine.ReadCommitted)
	first.Assign(p)
	poll(first)
	first.Commit()

	send("login")
	second := e.NewConsumer("mailer", engine.ReadCommitted)
	second.Assign(p) // at the committed offset, 1
	poll(second)
	// Output:
	// 0: signup
	// 1: login
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

// Consume-process-produce: the consumer's input position commits in the
// same transaction as the output, so after a crash the input is processed
// again only if its output was not committed.
func ExampleTransactionalProducer_SendOffsets() {
	dir, _ := os.MkdirTemp("", "idemlog-example")
	defer os.RemoveAll(dir)
	e, _ := engine.Open(dir, engine.Options{})
	defer e.Close()
	e.CreateTopic("orders", 1)
	e.CreateTopic("invoices", 1)
	orders, _ := e.Partition("orders", 0)
	invoices, _ := e.Partition("invoices", 0)
	pr, _ := e.NewProducer()
	in := batch.NewBuilder(batch.CodecNone)
	in.Append(time.Now().UnixMilli(), nil, []byte("2 lamps"), nil)
	in.Append(time.Now().UnixMilli(), nil, []byte("1 book"), nil)
	pr.Send(orders, in)

	c := e.NewConsumer("invoicer", engine.ReadCommitted)
	c.Assign(orders)
	tp, _ := e.NewTransactionalProducer("invoicer", time.Minute)
	out := batch.NewBuilder(batch.CodecNone)
	c.Poll(orders, 1<<20, func(r *batch.Record) error {
		out.Append(r.Timestamp, nil, append([]byte("invoice: "), r.Value...), nil)
		return nil
	})
	tp.Send(invoices, out)
	tp.SendOffsets("invoicer", map[engine.TopicPartition]engine.OffsetAndMetadata{
		{Topic: "orders", Partition: 0}: {Offset: c.Position(orders)},
	})
	tp.Commit()

	again := e.NewConsumer("invoicer", engine.ReadCommitted)
	again.Assign(orders)
	fmt.Println("the group resumes orders at", again.Position(orders))
	fmt.Println("invoices up to", invoices.LastStableOffset())
	// Output:
	// the group resumes orders at 2
	// invoices up to 3
}

// ReadCommitted returns raw batches below the last stable offset: nothing
// of a transaction still open, everything once it commits.
func ExamplePartition_ReadCommitted() {
	dir, _ := os.MkdirTemp("", "idemlog-example")
	defer os.RemoveAll(dir)
	e, _ := engine.Open(dir, engine.Options{})
	defer e.Close()
	e.CreateTopic("t", 1)
	p, _ := e.Partition("t", 0)
	tp, _ := e.NewTransactionalProducer("writer", time.Minute)
	bld := batch.NewBuilder(batch.CodecNone)
	bld.Append(time.Now().UnixMilli(), nil, []byte("pending"), nil)
	tp.Send(p, bld)

	c, _, _ := p.ReadCommitted(0, 1<<20, nil)
	fmt.Println("open:", len(c.Data), "bytes below the LSO", p.LastStableOffset(), "of", p.HighWatermark())
	c.Release()

	tp.Commit()
	c, aborted, _ := p.ReadCommitted(0, 1<<20, nil)
	fmt.Println("committed: up to offset", c.NextOffset, "with", len(aborted), "aborted transactions")
	c.Release()
	// Output:
	// open: 0 bytes below the LSO 0 of 1
	// committed: up to offset 2 with 0 aborted transactions
}
