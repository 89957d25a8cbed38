package main

import "math/rand/v2"

// payload hands out record values: windows of one pool of random bytes (as
// the issue asks: incompressible, so no codec flatters anyone), at a moving
// offset so consecutive records differ. The pool is shared read-only; the
// clients and engines under test copy what they keep.
type payload struct {
	pool []byte
	size int
	off  int
}

// stride keeps consecutive windows from starting at the same alignment.
const stride = 7

func newPayload(size int, seed uint64) *payload {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	pool := make([]byte, 1<<20+size)
	for i := range pool {
		pool[i] = byte(rng.Uint32())
	}
	return &payload{pool: pool, size: size}
}

func (p *payload) next() []byte {
	if p.off+p.size > len(p.pool) {
		p.off %= len(p.pool) - p.size + 1
	}
	v := p.pool[p.off : p.off+p.size : p.off+p.size]
	p.off += p.size + stride
	return v
}
