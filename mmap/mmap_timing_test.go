//go:build linux

package mmap

import (
	"errors"
	"testing"
)

const benchRegion = 1 << 20

func benchMapping(b *testing.B) *Mapping {
	f := tempFile(b, b.TempDir(), benchRegion)
	m := mustMap(b, f, 0, benchRegion, true)
	b.Cleanup(func() { m.Unmap() })
	return m
}

// Both benchmarks end each iteration with DontNeed, which drops the
// page-table entries but keeps the pages in the page cache, so each
// iteration measures the same work: making 1 MiB of cached file pages
// writable in the page tables.

func BenchmarkPopulateWrite(b *testing.B) {
	m := benchMapping(b)
	if err := m.PopulateWrite(0, benchRegion); errors.Is(err, ErrPopulateUnsupported) {
		b.Skip(err)
	} else if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(benchRegion)
	for b.Loop() {
		if err := m.PopulateWrite(0, benchRegion); err != nil {
			b.Fatal(err)
		}
		if err := m.DontNeed(0, benchRegion); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTouchPages(b *testing.B) {
	m := benchMapping(b)
	buf, ps := m.Bytes(), PageSize()
	b.SetBytes(benchRegion)
	for b.Loop() {
		for i := 0; i < len(buf); i += ps {
			buf[i] = 0
		}
		if err := m.DontNeed(0, benchRegion); err != nil {
			b.Fatal(err)
		}
	}
}
