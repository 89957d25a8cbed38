package engine

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/idemlog/idemlog/internal/testutil"
)

var powerCutSeeds = flag.Int("powercut.seeds", 12, "seeds of TestPowerCutTransactionsRandom")

// TestPowerCutTransactionsRandom runs random transactions of two ids, one
// through the TransactionalProducer (version 2), one through the
// coordinator's version-1 calls, over three partitions, with the logs
// synced at random moments (as rolls, the interval flusher or the OS sync
// them under "never" and "interval"), then cuts the power (cutPower) and
// reopens, twice per seed. After each cut every id must be initialised
// again, every partition's last stable offset must then reach its high
// watermark, and under "always" read_committed must show exactly the
// values of the transactions whose commit returned, in the order sent.
// -powercut.seeds=N runs more seeds.
func TestPowerCutTransactionsRandom(t *testing.T) {
	t.Parallel()
	seeds := *powerCutSeeds
	if testing.Short() {
		seeds = 3
	}
	for seed := range uint64(seeds) {
		policy := []string{"always", "never", "interval=1h"}[seed%3]
		t.Run(fmt.Sprintf("%d-%s", seed, policy), func(t *testing.T) {
			runPowerCutTransactions(t, seed, policy)
		})
	}
}

// powerCutModel is what the test expects after a cut under "always".
type powerCutModel struct {
	next byte
	// sent is every value sent to each partition, in offset order, with
	// the transaction it belongs to; done says how each ended.
	sent [3][]powerCutValue
	done map[int]bool // transaction -> committed
	txn  [2]int       // each id's current transaction
	seq  int
}

type powerCutValue struct {
	v   byte
	txn int
}

// send records value v sent by id k to partition i.
func (m *powerCutModel) send(k, i int, v byte) {
	m.sent[i] = append(m.sent[i], powerCutValue{v, m.txn[k]})
}

// committed is what read_committed must show of partition i.
func (m *powerCutModel) committed(i int) []byte {
	var out []byte
	for _, s := range m.sent[i] {
		if m.done[s.txn] {
			out = append(out, s.v)
		}
	}
	return out
}

// begin gives id k a new transaction number.
func (m *powerCutModel) begin(k int) {
	m.seq++
	m.txn[k] = m.seq
}

func runPowerCutTransactions(t *testing.T, seed uint64, policy string) {
	rng := rand.New(rand.NewPCG(seed, 17))
	dir := t.TempDir()
	opts := powerLossOptions(t, policy)
	model := powerCutModel{next: 1, done: map[int]bool{}}
	e := openEngine(t, dir, opts)
	if err := e.CreateTopic("out", 3); err != nil {
		t.Fatal(err)
	}
	for cut := range 2 {
		parts := [3]*Partition{}
		for i := range parts {
			parts[i], _ = e.Partition("out", i)
		}
		c, err := e.coordinator()
		if err != nil {
			t.Fatal(err)
		}
		tp, err := e.NewTransactionalProducer("v2", time.Minute)
		if err != nil {
			t.Fatalf("cut %d: cannot initialise v2: %v", cut, err)
		}
		pid, epoch := initV1(t, c)
		var seq [3]int32
		added := false
		model.begin(0)
		model.begin(1)
		for range 12 + rng.IntN(12) {
			switch op := rng.IntN(10); {
			case op < 3: // version 2 send
				i := rng.IntN(3)
				v := model.next
				model.next++
				if err := txnSend(t, tp, parts[i], v); err != nil {
					t.Fatalf("v2 send: %v", err)
				}
				model.send(0, i, v)
			case op < 4: // version 2 end
				commit := rng.IntN(3) > 0
				end := tp.Abort
				if commit {
					end = tp.Commit
				}
				if err := end(); err != nil {
					t.Fatalf("v2 end (commit %v): %v", commit, err)
				}
				model.settle(0, commit)
			case op < 6: // version 1 send
				i := rng.IntN(3)
				if err := c.AddPartitions("v1", pid, epoch, []TopicPartition{{"out", int32(i)}}, false); err != nil {
					t.Fatalf("v1 add: %v", err)
				}
				added = true
				v := model.next
				model.next++
				b := valueBatchAt(t, pid, epoch, seq[i], v)
				if _, err := parts[i].Append(b); err != nil {
					t.Fatalf("v1 send: %v", err)
				}
				seq[i]++
				model.send(1, i, v)
			case op < 7: // version 1 end
				if !added {
					continue
				}
				commit := rng.IntN(3) > 0
				if _, _, err := c.EndTxn("v1", pid, epoch, commit); err != nil {
					t.Fatalf("v1 end (commit %v): %v", commit, err)
				}
				added = false
				model.settle(1, commit)
			default: // a sync of one log, as a roll, a flusher or the OS makes
				logs := append(parts[:], c.log)
				if err := logs[rng.IntN(len(logs))].log.Flush(); err != nil {
					t.Fatal(err)
				}
			}
		}
		cutPower(t, e)
		e = openEngine(t, dir, opts)
		// Every id can be initialised again, and then every partition is
		// stable: an open transaction is one an Ongoing record lists,
		// which the initialisation fences.
		c, err = e.coordinator()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.NewTransactionalProducer("v2", time.Minute); err != nil {
			t.Fatalf("cut %d: cannot initialise v2 again: %v", cut, err)
		}
		initV1(t, c)
		stableEverywhere(t, e)
		if t.Failed() {
			return
		}
		if policy == "always" {
			for i := range 3 {
				p, _ := e.Partition("out", i)
				if got, want := readCommittedValues(t, p), model.committed(i); string(got) != string(want) {
					t.Fatalf("cut %d: out-%d read_committed %v, want %v", cut, i, got, want)
				}
			}
		}
		if policy != "always" {
			// What survived is the policy's business; from here on the
			// model follows what the partitions show.
			for i := range 3 {
				p, _ := e.Partition("out", i)
				model.sent[i] = nil
				for _, v := range readCommittedValues(t, p) {
					model.sent[i] = append(model.sent[i], powerCutValue{v, 0})
				}
			}
			model.done[0] = true
		}
	}
	e.Close()
}

// settle ends id k's transaction in the model.
func (m *powerCutModel) settle(k int, commit bool) {
	m.done[m.txn[k]] = commit
	m.begin(k)
}

// initV1 initialises the version-1 id, retrying while an earlier
// instance's transaction is aborted, as a client does.
func initV1(t *testing.T, c *Coordinator) (int64, int16) {
	t.Helper()
	for range 3 {
		pid, epoch, err := c.InitProducerID("v1", time.Minute)
		if errors.Is(err, ErrConcurrentTransactions) {
			continue
		}
		if err != nil {
			t.Fatalf("cannot initialise v1: %v", err)
		}
		return pid, epoch
	}
	t.Fatal("cannot initialise v1: CONCURRENT_TRANSACTIONS three times")
	return 0, 0
}

// valueBatchAt is a transactional batch of producer pid at epoch with base
// sequence seq and one record whose value is v.
func valueBatchAt(t *testing.T, pid int64, epoch int16, seq int32, v byte) []byte {
	t.Helper()
	return testutil.Batch(t, testutil.BatchSpec{Producer: true, PID: pid, Epoch: epoch, Seq: seq, Transactional: true,
		Values: [][]byte{{v}}, Timestamp: time.Now().UnixMilli()})
}
