package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/internal/testutil"
)

var (
	killRuns     = flag.Int("kill.runs", 50, "TestKilledServiceAppliesOnce: SIGKILLed runs of the service")
	killMaxDelay = flag.Duration("kill.max-delay", 150*time.Millisecond, "TestKilledServiceAppliesOnce: longest a run lives before its SIGKILL")
)

// The child's environment: the directory of its engine and database.
const childDirEnv = "SINK_SQLITE_CHILD_DIR"

// TestServiceChild is the service as a child process of
// TestKilledServiceAppliesOnce (skipped otherwise): it produces transfers
// without end and applies them until it is killed.
func TestServiceChild(t *testing.T) {
	dir := os.Getenv(childDirEnv)
	if dir == "" {
		t.Skip("run as a child of TestKilledServiceAppliesOnce")
	}
	cfg := testConfig(dir)
	cfg.produce = -1
	cfg.ready = func() { fmt.Println("ready") }
	if err := serve(context.Background(), cfg); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(1)
	}
}

// testConfig is the service's configuration in dir: small fetches, so
// that a run commits many database transactions for a kill to fall in.
func testConfig(dir string) config {
	return config{
		dir: filepath.Join(dir, "log"), dbPath: filepath.Join(dir, "balances.db"),
		partitions: 3, accounts: 20, abortEvery: 3, maxBytes: 512, drainIdle: 200 * time.Millisecond,
	}
}

// TestKilledServiceAppliesOnce SIGKILLs the service (producer and sink
// in one process) at random moments, kill.runs times, then lets a last
// run apply what is left, and checks the database against the log: the
// ledger holds every committed transfer exactly once and nothing else
// (no transfer of an aborted or unfinished transaction), and each
// balance is the sum of the committed transfers. A sink that committed
// positions apart from effects would apply some transfer twice or never
// after a kill in between.
func TestKilledServiceAppliesOnce(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 22))
	growing := 0
	var last int64
	for run := range *killRuns {
		// The service lives a random time after it is ready, up to
		// kill.max-delay; one that exits before its SIGKILL (an error in
		// the service) fails the test.
		delay := max(time.Duration(rng.Int64N(int64(*killMaxDelay)+1)), time.Nanosecond)
		c := testutil.StartChild(t, "TestServiceChild", childDirEnv+"="+dir)
		if res := c.Watch(t, fmt.Sprintf("run %d", run), testutil.Watch{KillAfter: delay, Guard: 30*time.Second + delay}); !res.Killed {
			t.Fatalf("run %d: the service exited before its SIGKILL: %v", run, res.Err)
		}
		if n := ledgerRows(t, dir); n > last {
			growing++
			last = n
		}
	}
	// Kills that all fell before the first commit would prove nothing.
	if growing < *killRuns/4 {
		t.Fatalf("the ledger grew in only %d of %d runs", growing, *killRuns)
	}

	// The last run produces nothing (it ends the transaction the last
	// kill left open) and applies the rest.
	cfg := testConfig(dir)
	cfg.drain = true
	if err := serve(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	committed, aborted := logTransfers(t, cfg.dir)
	if aborted == 0 {
		t.Fatal("no aborted transfer in the log: the test would not see them applied")
	}
	checkDatabase(t, cfg.dbPath, committed)
	t.Logf("%d runs killed, %d committed transfers applied once, %d aborted ones not applied", *killRuns, len(committed), aborted)
}

// ledgerRows counts the ledger's rows in dir's database (0 before the
// first run created it).
func ledgerRows(t *testing.T, dir string) int64 {
	t.Helper()
	db, err := openDB(filepath.Join(dir, "balances.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int64
	if err := db.QueryRow("SELECT COUNT(*) FROM ledger").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// logTransfers reads the topic with an engine consumer of its own: the
// committed transfers (read_committed) and how many transfers the log
// holds besides (read_uncommitted sees aborted ones too).
func logTransfers(t *testing.T, dir string) (map[int64]transfer, int) {
	t.Helper()
	e, err := engine.Open(dir, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	read := func(iso engine.Isolation) map[int64]transfer {
		c := e.NewConsumer("", iso)
		out := map[int64]transfer{}
		for i := range e.Topics()[topic] {
			p, _ := e.Partition(topic, i)
			if err := c.Assign(p); err != nil {
				t.Fatal(err)
			}
			if iso == engine.ReadCommitted && p.LastStableOffset() != p.HighWatermark() {
				t.Fatalf("%s-%d: a transaction is still open after the last run", topic, i)
			}
			for c.Position(p) < p.HighWatermark() {
				_, err := c.Poll(p, 1<<20, func(r *batch.Record) error {
					tr, err := decodeTransfer(r.Value)
					if err != nil {
						return err
					}
					if _, dup := out[tr.id]; dup {
						return fmt.Errorf("transfer id %d twice in the log", tr.id)
					}
					out[tr.id] = tr
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		return out
	}
	committed := read(engine.ReadCommitted)
	all := read(engine.ReadUncommitted)
	return committed, len(all) - len(committed)
}

// checkDatabase compares the database with one application of each
// committed transfer.
func checkDatabase(t *testing.T, dbPath string, committed map[int64]transfer) {
	t.Helper()
	db, err := openDB(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT transfer_id, COUNT(*) FROM ledger GROUP BY transfer_id")
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for rows.Next() {
		var id, n int64
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		if _, ok := committed[id]; !ok {
			t.Errorf("transfer %d applied %d times but not committed in the log", id, n)
		} else if n != 1 {
			t.Errorf("transfer %d applied %d times", id, n)
		}
		seen++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	if seen != len(committed) {
		t.Errorf("%d transfers applied, %d committed", seen, len(committed))
	}
	want := map[int64]int64{}
	for _, tr := range committed {
		want[int64(tr.from)] -= tr.amount
		want[int64(tr.to)] += tr.amount
	}
	rows, err = db.Query("SELECT id, balance FROM accounts")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[int64]int64{}
	for rows.Next() {
		var id, bal int64
		if err := rows.Scan(&id, &bal); err != nil {
			t.Fatal(err)
		}
		got[id] = bal
	}
	for id, bal := range want {
		if got[id] != bal {
			t.Errorf("account %d: balance %d, want %d", id, got[id], bal)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d accounts in the database, %d in the committed transfers", len(got), len(want))
	}
}

func TestRunMainAppliesProducedTransfers(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.produce, cfg.drain = 500, true
	if err := runMain(context.Background(), cfg, io.Discard); err != nil {
		t.Fatal(err)
	}
	committed, _ := logTransfers(t, cfg.dir)
	if len(committed) != 500 {
		t.Fatalf("%d committed transfers, want 500", len(committed))
	}
	checkDatabase(t, cfg.dbPath, committed)
}
