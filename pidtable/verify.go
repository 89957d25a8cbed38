package pidtable

import "fmt"

// verifyPrivate checks a table that a resizer has just filled and not yet
// published: every key unique, reachable from its home slot without
// crossing an empty slot, and the counters equal to the number of entries.
func (tb *table) verifyPrivate() error {
	n, err := tb.verify(nil, nil)
	if err != nil {
		return err
	}
	if used := tb.used.Load(); used != int64(n) || tb.live.Load() != used {
		return fmt.Errorf("%d entries, used %d, live %d", n, used, tb.live.Load())
	}
	return nil
}

// verify checks the structure of tb (at quiescence): live keys unique and
// reachable by a probe, no dead or moved entry in a private table. seen, if
// not nil, collects the live pids; inShard, if not nil, says whether a
// hash belongs to tb's shard. It returns the live count.
func (tb *table) verify(seen map[int64]bool, inShard func(h uint64) bool) (int, error) {
	n := len(tb.entries)
	if tb.limit >= int64(n) {
		return 0, fmt.Errorf("limit %d >= %d slots", tb.limit, n)
	}
	live, claimed := 0, 0
	keys := make(map[uint64]bool)
	for i := range tb.entries {
		e := &tb.entries[i]
		k := e.key.Load()
		if k == 0 && e.lock.Load() != lockFree {
			return 0, fmt.Errorf("empty slot %d locked at quiescence", i)
		}
		if k == 0 || k == keySealed {
			continue
		}
		claimed++
		switch l := e.lock.Load(); l {
		case lockDead:
			continue
		case lockFree:
		default:
			return 0, fmt.Errorf("slot %d (pid %d): lock word %d at quiescence", i, k-1, l)
		}
		if keys[k] {
			return 0, fmt.Errorf("pid %d has two live entries", k-1)
		}
		keys[k] = true
		if inShard != nil && !inShard(hashPID(int64(k-1))) {
			return 0, fmt.Errorf("pid %d in the wrong shard", k-1)
		}
		if seen != nil {
			if seen[int64(k-1)] {
				return 0, fmt.Errorf("pid %d lives in two shards", k-1)
			}
			seen[int64(k-1)] = true
		}
		live++
		// Reachability: no empty slot between home and i.
		for j := home(hashPID(int64(k-1)), n); j != i; {
			if tb.entries[j].key.Load() == 0 {
				return 0, fmt.Errorf("pid %d at slot %d unreachable: slot %d empty", k-1, i, j)
			}
			if j++; j == n {
				j = 0
			}
		}
	}
	if used := tb.used.Load(); used != int64(claimed) {
		return 0, fmt.Errorf("used %d, %d slots claimed", used, claimed)
	}
	if tb.live.Load() != int64(live) {
		return 0, fmt.Errorf("live counter %d, %d live entries", tb.live.Load(), live)
	}
	return live, nil
}

// verify checks every shard's current table and the table's count; call it
// only at quiescence (no operation in flight).
func (t *Table) verify() error {
	seen := make(map[int64]bool)
	total := 0
	for si := range t.shards {
		tb := t.shards[si].table.Load()
		if tb.frozen.Load() {
			return fmt.Errorf("shard %d: current table frozen", si)
		}
		n, err := tb.verify(seen, func(h uint64) bool { return h>>t.shift == uint64(si) })
		if err != nil {
			return fmt.Errorf("shard %d: %w", si, err)
		}
		total += n
	}
	if c := t.count.Load(); c != int64(total) {
		return fmt.Errorf("count %d, %d live entries", c, total)
	}
	return nil
}
