//go:build linux

package index

import (
	"math/rand/v2"
	"testing"
)

// Lookup against a linear model, with enough entries to use the warm tail,
// and TruncateTo followed by a reopen.
func TestReviewEIndexModel(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for round := 0; round < 20; round++ {
		path := offsetPath(t)
		tpath := timePath(t)
		x := mustOpenOffset(t, path, 1<<16)
		ti := mustOpenTime(t, tpath, 1<<16)
		n := r.IntN(3000)
		var offs, poss, tss, toffs []int64
		off, pos, ts := int64(testBase), int64(0), int64(r.IntN(3))
		for i := 0; i < n && !x.Full() && !ti.Full(); i++ {
			off += 1 + int64(r.IntN(5))
			pos += 1 + int64(r.IntN(100))
			if err := x.Append(off, pos); err != nil {
				t.Fatal(err)
			}
			offs, poss = append(offs, off), append(poss, pos)
			if r.IntN(3) > 0 {
				ts += int64(r.IntN(3))
			}
			before := ti.Entries()
			if err := ti.MaybeAppend(ts, off); err != nil {
				t.Fatal(err)
			}
			if ti.Entries() > before {
				tss, toffs = append(tss, ts), append(toffs, off)
			}
		}
		check := func(what string) {
			for q := int64(testBase - 2); q <= off+2; q++ {
				wo, wp := int64(testBase), int64(0)
				for i := range offs {
					if offs[i] <= q {
						wo, wp = offs[i], poss[i]
					}
				}
				if go_, gp := x.Lookup(q); go_ != wo || gp != wp {
					t.Fatalf("%s: Lookup(%d) = %d,%d want %d,%d", what, q, go_, gp, wo, wp)
				}
			}
			for q := int64(-2); q <= ts+2; q++ {
				wo := int64(testBase)
				for i := range tss {
					if tss[i] <= q {
						wo = toffs[i]
					}
				}
				if g := ti.Lookup(q); g != wo {
					t.Fatalf("%s: time Lookup(%d) = %d want %d", what, q, g, wo)
				}
			}
		}
		check("fresh")
		cut := int64(testBase) + int64(r.IntN(int(off-testBase+3)))
		if err := x.TruncateTo(cut); err != nil {
			t.Fatal(err)
		}
		if err := ti.TruncateTo(cut); err != nil {
			t.Fatal(err)
		}
		k := 0
		for k < len(offs) && offs[k] < cut {
			k++
		}
		offs, poss = offs[:k], poss[:k]
		k = 0
		for k < len(toffs) && toffs[k] < cut {
			k++
		}
		tss, toffs = tss[:k], toffs[:k]
		check("truncated")
		x.Close()
		ti.Close()
		x = mustOpenOffset(t, path, 1<<16)
		ti = mustOpenTime(t, tpath, 1<<16)
		if len(tss) == 1 && tss[0] == 0 && toffs[0] == testBase {
			tss, toffs = nil, nil // documented: a lone {0,0} is dropped
		}
		check("reopened")
	}
}
