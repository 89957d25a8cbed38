package kafka

import (
	"math/bits"
	"net"
	"sync"
)

// Buffers for request frames, read-ahead and encoded responses come from
// bufPool and go back to it as soon as the request or response is done, so
// an idle connection holds no buffer at all: memory follows the requests in
// progress, not the number of connections or the largest request each one
// ever sent. sync.Pool lets the garbage collector drop what stays unused.

const (
	minBufClass = 12 // 4 KiB, the smallest pooled buffer
	maxBufClass = 27 // 128 MiB: larger than any frame (socket.request.max.bytes 100 MiB) or fetch response
)

var bufPools [maxBufClass + 1]sync.Pool

// boxes recycles the *[]byte headers the pools hold, so that giving a
// buffer back allocates nothing either.
var boxes = sync.Pool{New: func() any { return new([]byte) }}

// getBuf returns an empty buffer of capacity at least n, from the pool of
// the smallest power of two that holds n.
func getBuf(n int) []byte {
	c := minBufClass
	if n > 1<<minBufClass {
		c = bits.Len(uint(n - 1))
	}
	if c > maxBufClass {
		return make([]byte, 0, n)
	}
	if box, ok := bufPools[c].Get().(*[]byte); ok {
		b := (*box)[:0]
		*box = nil
		boxes.Put(box)
		return b
	}
	return make([]byte, 0, 1<<c)
}

// putBuf gives b back for reuse; b must not be used after. It goes to the
// pool of the largest power of two at or below its capacity, so that what
// getBuf takes from a pool is always large enough.
func putBuf(b []byte) {
	if cap(b) < 1<<minBufClass {
		return
	}
	c := min(bits.Len(uint(cap(b)))-1, maxBufClass)
	box := boxes.Get().(*[]byte)
	*box = b[:0]
	bufPools[c].Put(box)
}

// readAhead is how much a connection reads from the socket at once for
// headers and small requests (large frames are read straight into theirs).
const readAhead = 64 << 10

// connReader reads a connection with read-ahead, like bufio.Reader, but
// holds its buffer only while bytes wait in it: a connection that waits for
// its next request holds one byte, not 64 KiB.
type connReader struct {
	nc  net.Conn
	buf []byte // pooled while it holds unread bytes, else nil
	r   int    // buf[r:] is unread
	// first is a byte read by awaitByte, returned before buf.
	first    byte
	hasFirst bool
}

// buffered reports how many bytes were read from the socket and not yet
// returned.
func (c *connReader) buffered() int {
	n := len(c.buf) - c.r
	if c.hasFirst {
		n++
	}
	return n
}

// awaitByte waits for the next byte unless one is buffered already. It
// reads that byte alone, into the connReader itself, so the wait (which
// lasts while the client is idle) holds no buffer.
func (c *connReader) awaitByte() error {
	if c.buffered() > 0 {
		return nil
	}
	var b [1]byte
	for {
		n, err := c.nc.Read(b[:])
		if n == 1 {
			c.first, c.hasFirst = b[0], true
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func (c *connReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if c.hasFirst {
		p[0], c.hasFirst = c.first, false
		return 1, nil
	}
	if c.buf == nil {
		if len(p) >= readAhead {
			// A large read gains nothing from a copy through buf.
			return c.nc.Read(p)
		}
		buf := getBuf(readAhead)
		n, err := c.nc.Read(buf[:cap(buf)])
		if n == 0 {
			putBuf(buf)
			return 0, err
		}
		c.buf, c.r = buf[:n], 0
	}
	n := copy(p, c.buf[c.r:])
	c.r += n
	if c.r == len(c.buf) {
		putBuf(c.buf)
		c.buf, c.r = nil, 0
	}
	return n, nil
}

// release gives the read-ahead buffer back, for a connection that is done.
func (c *connReader) release() {
	if c.buf != nil {
		putBuf(c.buf)
		c.buf, c.r = nil, 0
	}
}
