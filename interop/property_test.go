package interop

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/idemlog/idemlog/batch"
)

// randBytes returns null, empty, or up to max bytes that are sometimes
// random and sometimes repetitive, so compressors take both their literal
// and their match paths.
func randBytes(rng *rand.Rand, pNull, pEmpty float64, maxLen int) []byte {
	switch p := rng.Float64(); {
	case p < pNull:
		return nil
	case p < pNull+pEmpty:
		return []byte{}
	}
	b := make([]byte, rng.IntN(maxLen+1))
	if rng.IntN(2) == 0 {
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
	} else {
		for i := range b {
			b[i] = "abcab"[i%5]
		}
	}
	return b
}

func randSpec(rng *rand.Rand) spec {
	n := 1 + rng.IntN(40)
	if rng.IntN(20) == 0 {
		n = 1 + rng.IntN(400)
	}
	base := rng.Int64N(2_000_000_000_000)
	if rng.IntN(20) == 0 {
		base = -1
	}
	recs := make([]rec, n)
	for i := range recs {
		r := &recs[i]
		r.TS = base + rng.Int64N(2_000_000) - 1_000_000
		if rng.IntN(30) == 0 {
			r.TS = base + rng.Int64N(math.MaxInt32) + math.MaxInt32
		}
		r.Key = randBytes(rng, 0.2, 0.15, 64)
		maxValue := 512
		if rng.IntN(25) == 0 {
			maxValue = 80 << 10 // spans several 32 KiB xerial blocks
		}
		r.Value = randBytes(rng, 0.15, 0.15, maxValue)
		for range rng.IntN(5) {
			r.Headers = append(r.Headers, hdr{
				Key:   string(randBytes(rng, 0, 0.2, 24)),
				Value: randBytes(rng, 0.25, 0.15, 48),
			})
		}
	}
	s := plain(recs...)
	s.Codec = allCodecs[rng.IntN(len(allCodecs))]
	if rng.IntN(2) == 0 {
		seq := rng.Int32()
		if rng.IntN(4) == 0 {
			seq = math.MaxInt32 - rng.Int32N(int32(n)) // sequences that wrap inside the batch
		}
		s = withProducer(s, rng.Int64N(1<<48), int16(rng.IntN(math.MaxInt16+1)), seq, rng.IntN(3) == 0)
	}
	return s
}

// TestPropertyRandomBatches runs random batches through both directions.
// Besides the record-level comparisons, it checks two invariants that need
// no model: with no codec both encoders write identical bytes, and with any
// codec each side inflates the other's section to the same bytes.
func TestPropertyRandomBatches(t *testing.T) {
	iters := 400
	if testing.Short() {
		iters = 50
	}
	rng := rand.New(rand.NewPCG(0x1de1, 0x0f4a))
	bld := new(batch.Builder)
	var d batch.Decoder
	for i := range iters {
		s := randSpec(rng)
		snappyRaw := rng.IntN(2) == 0

		franz := franzBuild(t, s)
		b, err := batch.ValidateProduce(franz, maxTestBatch)
		if err != nil {
			t.Fatalf("iteration %d (%v, %d records): ValidateProduce of franz-go batch: %v", i, s.Codec, len(s.Records), err)
		}
		checkIdemHeader(t, b, s)
		if diff := diffRecords(idemDecode(t, &d, b), s.Records); diff != "" {
			t.Fatalf("iteration %d (%v): idemlog decode of franz-go batch: %s", i, s.Codec, diff)
		}

		idem := idemBuild(t, bld, s, snappyRaw)
		fb := franzDecode(t, idem)
		checkFranzHeader(t, fb, s)
		if diff := diffRecords(fb.model(t), s.Records); diff != "" {
			t.Fatalf("iteration %d (%v, snappyRaw %v): franz-go decode of idemlog batch: %s", i, s.Codec, snappyRaw, diff)
		}

		section := franzSection(s.Records)
		if s.Codec == batch.CodecNone {
			if !bytes.Equal(idem, franz) {
				t.Fatalf("iteration %d: uncompressed batches differ at byte %d", i, firstDiff(idem, franz))
			}
			continue
		}
		if !bytes.Equal(fb.Section, section) {
			t.Fatalf("iteration %d (%v): kgo inflates idemlog's section to different bytes", i, s.Codec)
		}
		inflated, err := d.Decompress(s.Codec, batch.Batch(franz).Records())
		if err != nil || !bytes.Equal(inflated, section) {
			t.Fatalf("iteration %d (%v): idemlog inflates kgo's section wrongly (err %v)", i, s.Codec, err)
		}
	}
}
