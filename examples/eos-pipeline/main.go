// Command eos-pipeline is a consume-process-produce loop with exactly-once
// semantics inside the log: it reads orders from one topic, writes an
// invoice per order to another, and commits its input position in the
// same transaction, so that after any crash, retry or zombie instance each
// order yields exactly one visible invoice.
//
// It also shows the part exactly-once does not cover: a side effect outside
// the log (here, "sending an email") can run more than once when a
// transaction aborts or the process dies after the effect but before the
// commit. The example makes that effect idempotent by keying it on the
// record's (topic, partition, offset).
//
//	go run ./examples/eos-pipeline --orders 1000
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/producer"
)

func main() {
	orders := flag.Int("orders", 1000, "orders to process")
	dir := flag.String("dir", "", "data directory (default: a temporary one, removed at exit)")
	flag.Parse()
	if err := run(*dir, *orders, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "eos-pipeline:", err)
		os.Exit(1)
	}
}

// run produces the orders, processes them (with one simulated zombie
// takeover and one aborted attempt along the way) and checks the result.
func run(dir string, orders int, out *os.File) error {
	if dir == "" {
		d, err := os.MkdirTemp("", "eos-pipeline")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	e, err := engine.Open(dir, engine.Options{})
	if err != nil {
		return err
	}
	defer e.Close()
	for _, t := range []string{"orders", "invoices"} {
		if err := e.CreateTopic(t, 1); err != nil {
			return err
		}
	}
	in, _ := e.Partition("orders", 0)
	outP, _ := e.Partition("invoices", 0)

	// The upstream system: an idempotent producer of orders.
	pr, err := e.NewProducer()
	if err != nil {
		return err
	}
	bld := batch.NewBuilder(batch.CodecNone)
	for i := range orders {
		bld.Reset(batch.CodecNone)
		bld.Append(time.Now().UnixMilli(), nil, fmt.Appendf(nil, "order-%d", i), nil)
		if _, err := pr.Send(in, bld); err != nil {
			return err
		}
	}

	emailsSent := map[string]bool{} // the external system, keyed for idempotency
	attempts := 0                   // how often the effect ran: more than once for some orders
	process := func(tp *engine.TransactionalProducer, max int, abort bool) (int, error) {
		c := e.NewConsumer("invoicer", engine.ReadCommitted)
		if err := c.Assign(in); err != nil {
			return 0, err
		}
		out := batch.NewBuilder(batch.CodecNone)
		start := c.Position(in)
		n := 0
		_, err := c.Poll(in, 64<<10, func(r *batch.Record) error {
			if n == max {
				return errEnough
			}
			out.Append(r.Timestamp, nil, append([]byte("invoice for "), r.Value...), nil)
			// The side effect, made idempotent by its key.
			emailsSent[fmt.Sprintf("orders/0/%d", r.Offset)] = true
			attempts++
			n++
			return nil
		})
		if err != nil && err != errEnough {
			return 0, err
		}
		if n == 0 {
			return 0, nil
		}
		if _, err := tp.Send(outP, out); err != nil {
			return 0, err
		}
		next := c.Position(in)
		if err == errEnough {
			// Poll stopped early and did not move the position; each
			// order is its own one-record batch, so the next unread one
			// is n offsets on.
			next = start + int64(n)
		}
		if err := tp.SendOffsets("invoicer", map[engine.TopicPartition]engine.OffsetAndMetadata{
			{Topic: "orders", Partition: 0}: {Offset: next}}); err != nil {
			return 0, err
		}
		if abort {
			return 0, tp.Abort()
		}
		return n, tp.Commit()
	}

	first, err := e.NewTransactionalProducer("invoicer", time.Minute)
	if err != nil {
		return err
	}
	if _, err := process(first, 50, true); err != nil { // an attempt that aborts
		return err
	}
	if _, err := process(first, 50, false); err != nil {
		return err
	}
	// A second instance takes over; the first is now a zombie.
	second, err := e.NewTransactionalProducer("invoicer", time.Minute)
	if err != nil {
		return err
	}
	// The zombie is refused whatever input is left: a commit of offsets
	// reaches the coordinator, which knows the newer epoch. (Without this:
	// with no input left, the old check sent nothing and so failed.)
	err = first.SendOffsets("invoicer", map[engine.TopicPartition]engine.OffsetAndMetadata{
		{Topic: "orders", Partition: 0}: {Offset: 0}})
	if !errors.Is(err, engine.ErrProducerFenced) && !errors.Is(err, producer.ErrInvalidProducerEpoch) {
		return fmt.Errorf("the zombie instance was not fenced: %v", err)
	}
	for {
		n, err := process(second, 1<<30, false)
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
	}

	// Verify: one visible invoice per order in the log, this run's and
	// those an earlier run over the same --dir left, processed or not
	// (it may have crashed before processing them): every one is
	// processed by now. (Without this: comparing this run's invoices with
	// this run's orders reported false failures for a reused --dir.)
	total, err := countVisible(e, in)
	if err != nil {
		return err
	}
	invoices, err := countVisible(e, outP)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "orders %d in the log (%d from this run), invoices visible %d (exactly once, in the log)\n", total, orders, invoices)
	fmt.Fprintf(out, "email side effect ran %d times for %d distinct orders: outside the log, only its key made it idempotent\n", attempts, len(emailsSent))
	if invoices != total {
		return fmt.Errorf("%d invoices for %d orders", invoices, total)
	}
	return nil
}

var errEnough = fmt.Errorf("enough for one transaction")

// countVisible counts the records a read_committed reader sees in p.
func countVisible(e *engine.Engine, p *engine.Partition) (int, error) {
	c := e.NewConsumer("", engine.ReadCommitted)
	if err := c.Assign(p); err != nil {
		return 0, err
	}
	seen := 0
	for {
		n, err := c.Poll(p, 1<<20, func(*batch.Record) error { return nil })
		if err != nil {
			return 0, err
		}
		if n == 0 && c.Position(p) >= p.LastStableOffset() {
			return seen, nil
		}
		seen += n
	}
}
