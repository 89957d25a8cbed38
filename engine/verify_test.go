package engine

import (
	"testing"
	"time"
)

// TestVerificationEntryNeverExpires: docs/SEMANTICS.md §2.5 ("Verification
// entries older than the same limit are removed too"). A front end takes a
// verification token for a producer that then never writes to the
// partition (the coordinator refused it, or the client went away): no
// marker and no producer entry ever clears it, so ExpireProducers must drop
// it once producer.id.expiration.ms has passed. It is kept for ever: one
// map entry per such producer id, for the life of the process.
func TestVerificationEntryNeverExpires(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_700_000_000_000)
	e := openEngine(t, t.TempDir(), Options{ProducerIDExpiration: time.Hour, Now: func() time.Time { return now }})
	defer e.Close()
	if err := e.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	p, _ := e.Partition("t", 0)
	for pid := int64(100); pid < 110; pid++ {
		p.beginVerification(pid) // then nothing: its append never comes
	}
	now = now.Add(48 * time.Hour)
	e.expireProducers()
	p.verify.mu.Lock()
	left := len(p.verify.tokens)
	p.verify.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d verification entries left 48h after they were taken (producer.id.expiration.ms 1h); want 0", left)
	}
}
