package batch

import (
	"errors"
	"testing"
)

// TestValidateBuilt: every ValidateProduce check but the CRC: a freshly
// built batch passes, framing and produce-rule violations fail as in
// ValidateProduce, and only a CRC mismatch goes unnoticed (the caller
// vouches for the bytes).
func TestValidateBuilt(t *testing.T) {
	t.Parallel()
	bld := NewBuilder(CodecNone)
	bld.SetProducer(1, 0, 0)
	bld.Append(1, nil, []byte("v"), nil)
	b, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	good := append(Batch(nil), b...)
	if _, err := ValidateBuilt(good, 0); err != nil {
		t.Fatal(err)
	}
	mut := func(f func(Batch)) Batch {
		c := append(Batch(nil), good...)
		f(c)
		return c
	}
	for name, c := range map[string]struct {
		b    []byte
		want error
	}{
		"truncated":   {good[:len(good)-1], ErrTruncated},
		"magic":       {mut(func(c Batch) { c[16] = 1 }), ErrMagic},
		"too large":   {good, ErrTooLarge},
		"base offset": {mut(func(c Batch) { c.SetBaseOffset(5) }), ErrBaseOffset},
	} {
		max := 0
		if name == "too large" {
			max = len(good) - 1
		}
		if _, err := ValidateBuilt(c.b, max); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
		if _, err := ValidateProduce(c.b, max); !errors.Is(err, c.want) {
			t.Errorf("%s (ValidateProduce): %v, want %v", name, err, c.want)
		}
	}
	flipped := mut(func(c Batch) { c[len(c)-1] ^= 1 })
	if _, err := ValidateProduce(flipped, 0); !errors.Is(err, ErrCRC) {
		t.Fatalf("ValidateProduce missed a CRC mismatch: %v", err)
	}
	if _, err := ValidateBuilt(flipped, 0); err != nil {
		t.Fatalf("ValidateBuilt checked the CRC: %v", err)
	}
}
