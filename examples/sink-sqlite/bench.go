package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/sink"
)

// benchConfig is one --bench run.
type benchConfig struct {
	transfers  int // committed transfers each measured run applies
	rounds     int // measured runs of each loop
	maxBytes   int // sink.EngineSource.MaxBytes: sets the records per database transaction
	partitions int
	accounts   int
}

// benchResult is the outcome of a --bench run: the median throughput of
// each loop, in transfers per second.
type benchResult struct {
	withPositions, withoutPositions float64
	transactions                    int // database transactions of one run of the loop with positions
}

// runBench measures the sink loop that stores positions against the same
// loop writing the same rows without positions (a store whose
// SetPosition does nothing): the same engine data, a fresh database per
// run, the two loops alternating, first one then the other, so that
// drift of a shared machine hits both.
func runBench(ctx context.Context, cfg benchConfig, out io.Writer) error {
	res, err := bench(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%d transfers per run, %d runs each, max %d bytes per fetch (%d transactions per run)\n",
		cfg.transfers, cfg.rounds, cfg.maxBytes, res.transactions)
	fmt.Fprintf(out, "with positions:    %10.0f transfers/s (median)\n", res.withPositions)
	fmt.Fprintf(out, "without positions: %10.0f transfers/s (median)\n", res.withoutPositions)
	fmt.Fprintf(out, "ratio:             %10.3f\n", res.withPositions/res.withoutPositions)
	return nil
}

func bench(ctx context.Context, cfg benchConfig) (benchResult, error) {
	dir, err := os.MkdirTemp("", "sink-sqlite-bench")
	if err != nil {
		return benchResult{}, err
	}
	defer os.RemoveAll(dir)
	e, err := engine.Open(filepath.Join(dir, "log"), engine.Options{})
	if err != nil {
		return benchResult{}, err
	}
	defer e.Close()
	if err := e.CreateTopic(topic, cfg.partitions); err != nil {
		return benchResult{}, err
	}
	tp, err := e.NewTransactionalProducer(transactionID, time.Minute)
	if err != nil {
		return benchResult{}, err
	}
	if err := produceTransfers(ctx, e, tp, config{partitions: cfg.partitions, accounts: cfg.accounts, produce: cfg.transfers}); err != nil {
		return benchResult{}, err
	}

	var with, without []float64
	var res benchResult
	for i := range 2 * cfg.rounds {
		positions := i%4 == 0 || i%4 == 3 // ABBA order
		dbPath := filepath.Join(dir, fmt.Sprintf("run%d.db", i))
		elapsed, txns, err := benchRun(ctx, e, dbPath, cfg, positions)
		if err != nil {
			return benchResult{}, err
		}
		rate := float64(cfg.transfers) / elapsed.Seconds()
		if positions {
			with = append(with, rate)
			res.transactions = txns
		} else {
			without = append(without, rate)
		}
	}
	res.withPositions, res.withoutPositions = median(with), median(without)
	return res, nil
}

// benchRun applies every committed transfer to a fresh database at
// dbPath, with or without positions, and returns the time it took and
// the number of database transactions.
func benchRun(ctx context.Context, e *engine.Engine, dbPath string, cfg benchConfig, positions bool) (time.Duration, int, error) {
	db, err := openDB(dbPath)
	if err != nil {
		return 0, 0, err
	}
	defer db.Close()
	store, err := sink.NewSQLStore(ctx, db, sink.SQLOptions{})
	if err != nil {
		return 0, 0, err
	}
	st, err := prepareBalanceStatements(ctx, db)
	if err != nil {
		return 0, 0, err
	}
	src, err := sink.NewEngineSource(e, topic)
	if err != nil {
		return 0, 0, err
	}
	src.MaxBytes = cfg.maxBytes
	var poll func(context.Context) (int, error)
	if positions {
		s, err := sink.New(src, store, group, func(ctx context.Context, tx *sink.SQLTx, recs []sink.Record) error {
			return st.apply(ctx, tx.Tx, recs)
		})
		if err != nil {
			return 0, 0, err
		}
		poll = s.Poll
	} else {
		s, err := sink.New(src, positionlessStore{store}, group, func(ctx context.Context, tx positionlessTx, recs []sink.Record) error {
			return st.apply(ctx, tx.SQLTx.Tx, recs)
		})
		if err != nil {
			return 0, 0, err
		}
		poll = s.Poll
	}
	start := time.Now()
	applied, txns := 0, 0
	for applied < cfg.transfers {
		n, err := poll(ctx)
		if err != nil {
			return 0, 0, err
		}
		applied += n
		if n > 0 {
			txns++
		}
	}
	return time.Since(start), txns, nil
}

// positionlessStore is the baseline: the SQL store with SetPosition doing
// nothing, so that the loop writes the handler's rows only.
type positionlessStore struct{ *sink.SQLStore }

func (s positionlessStore) Positions(context.Context, string) (map[sink.TopicPartition]int64, error) {
	return nil, nil
}

func (s positionlessStore) Begin(ctx context.Context) (positionlessTx, error) {
	tx, err := s.SQLStore.Begin(ctx)
	return positionlessTx{tx}, err
}

// positionlessTx is an SQLTx whose SetPosition writes nothing.
type positionlessTx struct{ *sink.SQLTx }

func (positionlessTx) SetPosition(context.Context, string, sink.TopicPartition, int64, int64) error {
	return nil
}

func median(v []float64) float64 {
	slices.Sort(v)
	return v[len(v)/2]
}
