package bench

import (
	"math/rand/v2"
)

// words make text payloads: English-like and compressible, as log lines and
// JSON events are, so that codecs behave as they would on real data.
var words = []string{
	"the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with",
	"be", "by", "on", "not", "he", "this", "are", "or", "his", "from", "at", "which",
	"but", "have", "an", "had", "they", "you", "were", "their", "one", "all", "we",
	"request", "response", "user", "order", "payment", "status", "ok", "error",
	"timeout", "retry", "latency", "partition", "offset", "producer", "consumer",
	"topic", "batch", "record", "commit", "checkout", "session", "account", "id",
}

// payloadPool returns the bytes that record values are cut from: text or
// random bytes from the seed, shared (read-only) by every producer. Values
// are windows at a moving offset that never overlap within a batch, so
// records differ from each other and a codec sees realistic input: text
// compresses, random bytes do not.
func payloadPool(kind string, seed int64, recordSize, batchRecords int) []byte {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15))
	n := max(1<<20, batchRecords*(recordSize+strideExtra)) + recordSize
	buf := make([]byte, 0, n+16)
	if kind == "random" {
		buf = buf[:n]
		for i := 0; i < n; i += 8 {
			v := rng.Uint64()
			for j := 0; j < 8 && i+j < n; j++ {
				buf[i+j] = byte(v >> (8 * j))
			}
		}
		return buf
	}
	for len(buf) < n {
		buf = append(buf, words[rng.IntN(len(words))]...)
		if rng.IntN(12) == 0 {
			buf = append(buf, '.', '\n')
		} else {
			buf = append(buf, ' ')
		}
	}
	return buf[:n]
}

// strideExtra keeps windows from starting at the same alignment.
const strideExtra = 7

// payloadCursor hands out record values from a pool.
type payloadCursor struct {
	pool []byte
	size int
	off  int
}

func newCursor(pool []byte, size, producer int) *payloadCursor {
	span := len(pool) - size
	return &payloadCursor{pool: pool, size: size, off: int((uint64(producer) * 1000003) % uint64(span+1))}
}

func (c *payloadCursor) next() []byte {
	v := c.pool[c.off : c.off+c.size : c.off+c.size]
	c.off += c.size + strideExtra
	if span := len(c.pool) - c.size; c.off > span {
		c.off %= span + 1
	}
	return v
}
