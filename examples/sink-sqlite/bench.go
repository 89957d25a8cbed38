package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/sink"
)

// benchConfig is one --bench run.
type benchConfig struct {
	transfers  int // committed transfers each measured run applies
	runs       int // measured runs of each loop
	maxBytes   int // sink.EngineSource.MaxBytes: sets the records per database transaction
	partitions int
	accounts   int
}

// benchResult is the outcome of a --bench run: the median throughput of
// each loop, in transfers per second of wall-clock time and per second of
// the process's CPU time (user and system: on a machine shared with other
// work, wall time swings with the load, CPU time much less).
type benchResult struct {
	withPositions, withoutPositions       float64
	withPositionsCPU, withoutPositionsCPU float64
	transactions                          int // database transactions of one run of the loop with positions
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
		cfg.transfers, cfg.runs, cfg.maxBytes, res.transactions)
	fmt.Fprintf(out, "                   transfers/s wall  transfers/CPU-s (medians)\n")
	fmt.Fprintf(out, "with positions:    %16.0f  %15.0f\n", res.withPositions, res.withPositionsCPU)
	fmt.Fprintf(out, "without positions: %16.0f  %15.0f\n", res.withoutPositions, res.withoutPositionsCPU)
	fmt.Fprintf(out, "ratio:             %16.3f  %15.3f\n", res.withPositions/res.withoutPositions, res.withPositionsCPU/res.withoutPositionsCPU)
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

	var with, without, withCPU, withoutCPU []float64
	var res benchResult
	for i := range 2 * cfg.runs {
		positions := i%4 == 0 || i%4 == 3 // ABBA order
		dbPath := filepath.Join(dir, fmt.Sprintf("run%d.db", i))
		cpu0 := cpuTime()
		elapsed, txns, err := benchRun(ctx, e, dbPath, cfg, positions)
		if err != nil {
			return benchResult{}, err
		}
		cpu := cpuTime() - cpu0
		rate := float64(cfg.transfers) / elapsed.Seconds()
		cpuRate := float64(cfg.transfers) / max(cpu, time.Microsecond).Seconds()
		if positions {
			with, withCPU = append(with, rate), append(withCPU, cpuRate)
			res.transactions = txns
		} else {
			without, withoutCPU = append(without, rate), append(withoutCPU, cpuRate)
		}
	}
	res.withPositions, res.withoutPositions = median(with), median(without)
	res.withPositionsCPU, res.withoutPositionsCPU = median(withCPU), median(withoutCPU)
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

// cpuTime is the user and system CPU time the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func median(v []float64) float64 {
	slices.Sort(v)
	return v[len(v)/2]
}
