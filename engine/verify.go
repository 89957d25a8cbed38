package engine

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// Transaction verification (KIP-890 part 1) closes the window between a
// front end's check that a transaction is ongoing and its append. The
// coordinator's answer is only good until the transaction ends, and an end
// that lands in between (its marker written to the partition) would let
// the append open a new partition transaction that no coordinator knows
// and nothing ever ends: a hanging transaction, pinning the LSO.
//
// So, as Kafka's verification guard does, the front end takes a token from
// the partition (BeginVerification) before it asks the coordinator, and
// appends with it (AppendNoWaitVerified). Any marker of the producer clears
// its token, under the producer's table entry, which the append holds
// across its check and its write too: a verified append that would open a
// transaction succeeds only if no marker of the producer came after the
// token, so the coordinator's answer still holds.
//
//	front end                  partition (under pid's entry)   coordinator
//	t := BeginVerification  -> verified[pid] = t
//	Verify(id, pid, tp)     ------------------------------->   Ongoing, tp in it
//	                           [EndTxn's marker: delete verified[pid]]
//	AppendNoWaitVerified(t) -> opens a txn? verified[pid] == t, else INVALID_TXN_STATE
//
// An append that continues a transaction already open in the partition
// needs no token: that transaction is the coordinator's, which ends it with
// a marker. Appends of the embedding program (Append, AppendNoWait) are
// trusted and not verified, as transactional writes are where Kafka's
// verification is off.

// Verification is a token of BeginVerification for AppendNoWaitVerified.
// The zero value is no token: the append may only continue a transaction
// already open in the partition.
type Verification struct{ token uint64 }

// verifier holds a partition's verification tokens.
type verifier struct {
	mu     sync.Mutex
	tokens map[int64]verifyToken // by pid; deleted by pid's markers and by expiry
	next   atomic.Uint64
}

// verifyToken is a producer's token and when it was taken (Unix ms).
type verifyToken struct {
	token uint64
	taken int64
}

// beginVerification: see Frontend.BeginVerification.
func (p *Partition) beginVerification(pid int64) Verification {
	v := &p.verify
	v.mu.Lock()
	defer v.mu.Unlock()
	if t, ok := v.tokens[pid]; ok {
		return Verification{t.token}
	}
	if v.tokens == nil {
		v.tokens = map[int64]verifyToken{}
	}
	t := v.next.Add(1)
	v.tokens[pid] = verifyToken{token: t, taken: p.opts.Now().UnixMilli()}
	return Verification{t}
}

// verified reports whether pid's token is still t (the caller holds pid's
// table entry).
func (v *verifier) verified(pid int64, t uint64) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return t != 0 && v.tokens[pid].token == t
}

// clear drops pid's token: a marker ended its transaction (the caller
// holds pid's table entry).
func (v *verifier) clear(pid int64) {
	v.mu.Lock()
	delete(v.tokens, pid)
	v.mu.Unlock()
}

// expire drops the tokens taken at a time expired says has expired: a
// producer whose verification is never followed by its append (the
// coordinator refused it, the client went away) meets no marker and may
// have no entry to expire with, so its token would stay for the life of
// the process. Kafka removes verification entries older than
// producer.id.expiration.ms with the producers. It
// returns how many it dropped.
func (v *verifier) expire(expired func(taken int64) bool) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := 0
	for pid, t := range v.tokens {
		if expired(t.taken) {
			delete(v.tokens, pid)
			n++
		}
	}
	return n
}

// appendNoWaitVerified: see Frontend.AppendNoWaitVerified.
func (p *Partition) appendNoWaitVerified(b []byte, ver Verification) (res AppendResult, wait bool, err error) {
	res, wait, err = p.write(b, writeOpts{ver: &ver})
	return res, wait, p.gone(err)
}

// errUnverified is the refusal of an unverified append that would open a
// transaction.
func errUnverified(p *Partition, pid int64) error {
	return fmt.Errorf("cannot append to %s-%d: producer %d opens a transaction its coordinator did not verify, or that ended since: %w", p.topic, p.index, pid, ErrInvalidTxnState)
}
