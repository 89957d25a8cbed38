// Command sink-sqlite is a consume-and-apply service: it reads money
// transfers from a topic of an embedded idemlog engine (read_committed)
// and applies them to account balances in SQLite, exactly once, through
// package sink: each transaction of the database applies a batch of
// transfers and stores the topic positions after them, and a restart
// resumes from the positions in the database.
//
// An upstream producer is built in (--produce): it writes transfers in
// transactions and aborts some of them, whose transfers must never reach
// the balances. SQLite is modernc.org/sqlite, a pure-Go driver, so this
// builds without cgo.
//
//	go run . --produce 5000               # produce, apply, print the balances, exit
//	go run . --bench --transfers 200000   # the loop with positions vs without, same run
//
// Its test SIGKILLs the service at random moments and checks the
// balances against the log (go test . ; -kill.runs N for more than the
// default 50 kills). The module is its own (see go.mod) so that the
// SQLite driver stays out of idemlog's main go.mod.
package main

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/sink"
	_ "modernc.org/sqlite"
)

// The topic, the sink's group and the upstream producer's transactional id.
const (
	topic         = "transfers"
	group         = "balances"
	transactionID = "transfers-upstream"
)

// config is one run of the service.
type config struct {
	dir        string // the engine's data directory
	dbPath     string // the SQLite database file
	partitions int    // partitions of the topic, when it is created
	accounts   int    // transfers go between accounts 0..accounts-1
	// produce is how many transfers the built-in producer writes in this
	// run (negative: until the context ends, one transaction about every
	// millisecond).
	produce int
	// abortEvery: one producer transaction in abortEvery is aborted.
	abortEvery int
	// drain ends the run once the producer is done and the sink has
	// applied everything committed (no record for drainIdle).
	drain     bool
	drainIdle time.Duration
	maxBytes  int // sink.EngineSource.MaxBytes
	// ready, if set, is called once the engine, the database and the
	// producer are up, before the sink's first poll.
	ready func()
}

func main() {
	var cfg config
	flag.StringVar(&cfg.dir, "dir", "", "engine data directory (default: a temporary one, removed at exit)")
	flag.StringVar(&cfg.dbPath, "db", "", "SQLite database file (default: balances.db in --dir)")
	flag.IntVar(&cfg.partitions, "partitions", 4, "partitions of the transfers topic")
	flag.IntVar(&cfg.accounts, "accounts", 100, "number of accounts")
	flag.IntVar(&cfg.produce, "produce", 5000, "transfers the built-in producer writes (-1: until interrupted)")
	flag.IntVar(&cfg.abortEvery, "abort-every", 4, "one producer transaction in this many is aborted")
	flag.IntVar(&cfg.maxBytes, "max-bytes", sink.DefaultMaxBytes, "bytes of batches per fetch, so per database transaction")
	bench := flag.Bool("bench", false, "measure the sink loop with and without stored positions, side by side")
	transfers := flag.Int("transfers", 200000, "--bench: transfers to apply per measured run")
	runs := flag.Int("runs", 7, "--bench: measured runs of each loop, alternating")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if *bench {
		err = runBench(ctx, benchConfig{transfers: *transfers, runs: *runs, maxBytes: cfg.maxBytes, partitions: cfg.partitions, accounts: cfg.accounts}, os.Stdout)
	} else {
		cfg.drain, cfg.drainIdle = cfg.produce >= 0, 200*time.Millisecond
		err = runMain(ctx, cfg, os.Stdout)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "sink-sqlite:", err)
		os.Exit(1)
	}
}

// runMain runs the service in a temporary directory unless one is given,
// then prints the balances.
func runMain(ctx context.Context, cfg config, out io.Writer) error {
	if cfg.dir == "" {
		d, err := os.MkdirTemp("", "sink-sqlite")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		cfg.dir = d
	}
	if cfg.dbPath == "" {
		cfg.dbPath = filepath.Join(cfg.dir, "balances.db")
	}
	if err := serve(ctx, cfg); err != nil {
		return err
	}
	db, err := openDB(cfg.dbPath)
	if err != nil {
		return err
	}
	defer db.Close()
	var n, total, transfers int64
	if err := db.QueryRow("SELECT COUNT(*), COALESCE(SUM(balance), 0) FROM accounts").Scan(&n, &total); err != nil {
		return err
	}
	if err := db.QueryRow("SELECT COUNT(*) FROM ledger").Scan(&transfers); err != nil {
		return err
	}
	fmt.Fprintf(out, "%d transfers applied to %d accounts; balances sum to %d (every transfer moves money, none creates it)\n", transfers, n, total)
	return nil
}

// serve runs the producer (if any) and the sink until ctx ends, or, with
// cfg.drain, until everything committed is applied.
func serve(ctx context.Context, cfg config) error {
	e, err := engine.Open(cfg.dir, engine.Options{})
	if err != nil {
		return err
	}
	defer e.Close()
	if err := e.CreateTopic(topic, cfg.partitions); err != nil {
		return err
	}
	db, err := openDB(cfg.dbPath)
	if err != nil {
		return err
	}
	defer db.Close()
	s, err := newBalanceSink(ctx, e, db, cfg.maxBytes)
	if err != nil {
		return err
	}

	// The producer's first act, NewTransactionalProducer, ends a
	// transaction a previous run left open (fencing that run), so that
	// the partitions' last stable offsets are not held back by it.
	prodCtx, stopProducer := context.WithCancel(ctx)
	defer stopProducer()
	tp, err := e.NewTransactionalProducer(transactionID, time.Minute)
	if err != nil {
		return err
	}
	produced := make(chan error, 1)
	go func() { produced <- produceTransfers(prodCtx, e, tp, cfg) }()
	if cfg.ready != nil {
		cfg.ready()
	}

	producing := true
	for {
		// Whether the producer had finished before this poll: only then
		// does an idle poll mean that every committed transfer is applied
		// (its last commit is visible to the poll's first read).
		finished := !producing
		pollCtx, cancel := ctx, context.CancelFunc(func() {})
		if cfg.drain {
			pollCtx, cancel = context.WithTimeout(ctx, cfg.drainIdle)
		}
		_, err := s.Poll(pollCtx)
		cancel()
		switch {
		case err == nil:
		case cfg.drain && err == context.DeadlineExceeded && ctx.Err() == nil:
			// Compared, not errors.Is: Sink.Poll returns the wait's own
			// error unwrapped, and a transaction's step wrapped.
			if finished {
				return nil
			}
		default:
			return err
		}
		if producing {
			select {
			case perr := <-produced:
				if perr != nil {
					return perr
				}
				producing = false
			default:
			}
		}
	}
}

// openDB opens the SQLite database in WAL mode: a commit survives a
// process crash (synchronous=NORMAL syncs at checkpoints, not at every
// commit, so a power loss may take the last commits; use FULL for that).
// One connection: SQLite has one writer, and the sink is the only one.
func openDB(path string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	for _, q := range []string{
		"CREATE TABLE IF NOT EXISTS accounts (id INTEGER PRIMARY KEY, balance INTEGER NOT NULL)",
		// One row per application of a transfer, deliberately without a
		// unique key: a transfer applied twice shows as two rows.
		"CREATE TABLE IF NOT EXISTS ledger (transfer_id INTEGER NOT NULL, from_account INTEGER NOT NULL, to_account INTEGER NOT NULL, amount INTEGER NOT NULL)",
	} {
		if _, err := db.Exec(q); err != nil {
			db.Close()
			return nil, err
		}
	}
	return db, nil
}

// transfer is one record of the topic: amount moves from one account to
// another. Its value is 24 bytes: id, from, to, amount, big-endian.
type transfer struct {
	id       int64
	from, to int32
	amount   int64
}

func (t transfer) encode() []byte {
	b := make([]byte, 24)
	binary.BigEndian.PutUint64(b[0:], uint64(t.id))
	binary.BigEndian.PutUint32(b[8:], uint32(t.from))
	binary.BigEndian.PutUint32(b[12:], uint32(t.to))
	binary.BigEndian.PutUint64(b[16:], uint64(t.amount))
	return b
}

// errBadTransfer: a record whose value is not a transfer.
var errBadTransfer = errors.New("not a transfer")

func decodeTransfer(b []byte) (transfer, error) {
	if len(b) != 24 {
		return transfer{}, fmt.Errorf("cannot decode transfer of %d bytes: %w", len(b), errBadTransfer)
	}
	return transfer{
		id:     int64(binary.BigEndian.Uint64(b[0:])),
		from:   int32(binary.BigEndian.Uint32(b[8:])),
		to:     int32(binary.BigEndian.Uint32(b[12:])),
		amount: int64(binary.BigEndian.Uint64(b[16:])),
	}, nil
}

// balanceStatements are the handler's prepared statements.
type balanceStatements struct {
	credit *sql.Stmt // add to an account's balance, creating it at 0
	ledger *sql.Stmt // record one application of a transfer
}

func prepareBalanceStatements(ctx context.Context, db *sql.DB) (*balanceStatements, error) {
	credit, err := db.PrepareContext(ctx, "INSERT INTO accounts (id, balance) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET balance = balance + excluded.balance")
	if err != nil {
		return nil, err
	}
	ledger, err := db.PrepareContext(ctx, "INSERT INTO ledger (transfer_id, from_account, to_account, amount) VALUES (?, ?, ?, ?)")
	if err != nil {
		credit.Close()
		return nil, err
	}
	return &balanceStatements{credit: credit, ledger: ledger}, nil
}

// apply applies recs in tx: the same writes whether or not the sink
// stores positions with them (the benchmark's two loops share it).
func (st *balanceStatements) apply(ctx context.Context, tx *sql.Tx, recs []sink.Record) error {
	credit := tx.StmtContext(ctx, st.credit)
	ledger := tx.StmtContext(ctx, st.ledger)
	for i := range recs {
		t, err := decodeTransfer(recs[i].Value)
		if err != nil {
			return fmt.Errorf("cannot apply record %s: %w", recs[i].IdempotencyKey(), err)
		}
		if _, err := credit.ExecContext(ctx, t.from, -t.amount); err != nil {
			return err
		}
		if _, err := credit.ExecContext(ctx, t.to, t.amount); err != nil {
			return err
		}
		if _, err := ledger.ExecContext(ctx, t.id, t.from, t.to, t.amount); err != nil {
			return err
		}
	}
	return nil
}

// newBalanceSink is the service's sink: every partition of the topic,
// positions in the sink_positions table of the same database.
func newBalanceSink(ctx context.Context, e *engine.Engine, db *sql.DB, maxBytes int) (*sink.Sink[*sink.SQLTx], error) {
	store, err := sink.NewSQLStore(ctx, db, sink.SQLOptions{})
	if err != nil {
		return nil, err
	}
	st, err := prepareBalanceStatements(ctx, db)
	if err != nil {
		return nil, err
	}
	src, err := sink.NewEngineSource(e, topic)
	if err != nil {
		return nil, err
	}
	src.MaxBytes = maxBytes
	return sink.New(src, store, group, func(ctx context.Context, tx *sink.SQLTx, recs []sink.Record) error {
		return st.apply(ctx, tx.Tx, recs)
	})
}

// produceTransfers writes cfg.produce transfers (or until ctx ends) in
// transactions of 1 to 8 transfers over random partitions, aborting one
// transaction in cfg.abortEvery.
func produceTransfers(ctx context.Context, e *engine.Engine, tp *engine.TransactionalProducer, cfg config) error {
	parts := make([]*engine.Partition, cfg.partitions)
	for i := range parts {
		p, err := e.Partition(topic, i)
		if err != nil {
			return err
		}
		parts[i] = p
	}
	bld := batch.NewBuilder(batch.CodecNone)
	for sent := 0; cfg.produce < 0 || sent < cfg.produce; {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := 1 + rand.IntN(8)
		if cfg.produce >= 0 {
			n = min(n, cfg.produce-sent)
		}
		for range n {
			t := transfer{id: rand.Int64(), from: rand.Int32N(int32(cfg.accounts)), to: rand.Int32N(int32(cfg.accounts)), amount: 1 + rand.Int64N(1000)}
			bld.Reset(batch.CodecNone)
			bld.Append(time.Now().UnixMilli(), nil, t.encode(), nil)
			if _, err := tp.Send(parts[rand.IntN(len(parts))], bld); err != nil {
				return err
			}
		}
		if cfg.abortEvery > 0 && rand.IntN(cfg.abortEvery) == 0 {
			if err := tp.Abort(); err != nil {
				return err
			}
			continue
		}
		if err := tp.Commit(); err != nil {
			return err
		}
		sent += n
		if cfg.produce < 0 {
			time.Sleep(time.Millisecond)
		}
	}
	return nil
}
