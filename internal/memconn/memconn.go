// Package memconn is an in-memory, buffered, full-duplex net.Conn pair.
//
// net.Pipe is synchronous: every Write waits until a Read on the other end
// has taken all of it, so a writer and a reader take turns and neither
// runs ahead. A Kafka connection is pipelined (a client sends its next
// requests while the broker answers the first; the broker's writer encodes
// the next response while the client decodes the last), so a pipe here
// buffers each direction in a ring: a Write returns as soon as its bytes
// are copied in, and blocks only while the ring is full. A Write that
// finds the ring full lends the rest of its slice to the reader while it
// waits, and a reader that has emptied the ring copies straight from it:
// the part of a large write (a fetch response of megabytes) beyond the
// ring's size is copied once, as net.Pipe copies, instead of into the
// ring and out again. Writes are serialized, as a TCP conn's are, so the
// bytes of concurrent Writes never interleave.
//
// Deadlines behave as a TCP connection's do (net.Conn's contract): a Read
// or Write past its deadline fails with an error that wraps
// os.ErrDeadlineExceeded and reports Timeout(), and a later deadline makes
// the conn usable again. Closing an end makes its own calls fail with
// net.ErrClosed; the other end reads what was written before the close
// and then io.EOF, and its writes fail with io.ErrClosedPipe.
package memconn

import (
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// DefaultBufferSize is the ring size of each direction when Pipe is given
// none: room for many pipelined requests and small responses; a larger
// write goes past it straight to the reader.
const DefaultBufferSize = 64 << 10

// Addr names one end of a pipe (its LocalAddr, the other end's
// RemoteAddr). Its network is "memory".
type Addr string

// Network returns "memory".
func (Addr) Network() string { return "memory" }

func (a Addr) String() string { return string(a) }

// Pipe returns the two ends of a connection, each direction buffered in a
// ring of size bytes (DefaultBufferSize when size <= 0). The rings are
// allocated by their first Write, so an idle connection holds no buffer.
// local and remote name the ends: a's LocalAddr is local, b's is remote.
func Pipe(size int, local, remote Addr) (a, b net.Conn) {
	if size <= 0 {
		size = DefaultBufferSize
	}
	ab, ba := newRing(size), newRing(size)
	ca := &Conn{rx: ba, tx: ab, local: local, remote: remote, done: make(chan struct{})}
	cb := &Conn{rx: ab, tx: ba, local: remote, remote: local, done: make(chan struct{})}
	ca.rd.init()
	ca.wd.init()
	cb.rd.init()
	cb.wd.init()
	return ca, cb
}

// ring is one direction of a pipe: bytes written and not yet read.
type ring struct {
	mu   sync.Mutex
	size int
	buf  []byte
	head int // index of the first unread byte
	n    int // bytes buffered
	// writerGone: the writing end closed; the reader drains, then EOF.
	writerGone bool
	// readerGone: the reading end closed; writes fail.
	readerGone bool
	// pending is the rest of a Write that found the ring full, lent to
	// the reader while its writer waits; the reader takes from it once
	// the ring is empty (the ring's bytes come first) and counts what it
	// took in taken, which the writer collects when it wakes.
	pending []byte
	taken   int
	// readable and writable wake a waiting reader or writer; each holds at
	// most one token, and a woken side re-checks the state under mu, so a
	// token left over from an earlier change costs a spurious loop only.
	readable chan struct{}
	writable chan struct{}
}

func newRing(size int) *ring {
	return &ring{size: size, readable: make(chan struct{}, 1), writable: make(chan struct{}, 1)}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// read copies buffered bytes into p. wait: nothing is buffered and the
// writer is still there.
func (r *ring) read(p []byte) (n int, err error, wait bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	lent := len(r.pending) - r.taken
	if r.n == 0 && lent == 0 {
		if r.writerGone {
			return 0, io.EOF, false
		}
		return 0, nil, true
	}
	for n < len(p) && r.n > 0 {
		end := r.head + r.n
		if end > r.size {
			end = r.size
		}
		c := copy(p[n:], r.buf[r.head:end])
		n += c
		r.n -= c
		r.head += c
		if r.head == r.size {
			r.head = 0
		}
	}
	if r.n == 0 && lent > 0 && n < len(p) {
		c := copy(p[n:], r.pending[r.taken:])
		n += c
		r.taken += c
		lent -= c
	}
	if r.n == 0 {
		r.head = 0 // the next write starts at the front: one copy, not two
	}
	if r.n > 0 || lent > 0 {
		signal(r.readable) // another reader may take the rest
	}
	signal(r.writable)
	return n, nil, false
}

// write copies as much of p as fits and lends the rest to the reader
// (collect ends the loan).
func (r *ring) write(p []byte) (n int, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.readerGone {
		return 0, io.ErrClosedPipe
	}
	if r.buf == nil {
		r.buf = make([]byte, r.size)
	}
	for n < len(p) && r.n < r.size {
		tail := r.head + r.n
		if tail >= r.size {
			tail -= r.size
		}
		end := r.size
		if tail < r.head {
			end = r.head
		}
		c := copy(r.buf[tail:end], p[n:])
		n += c
		r.n += c
	}
	if n < len(p) {
		r.pending, r.taken = p[n:], 0
	}
	signal(r.readable)
	return n, nil
}

// collect ends the loan of a write's rest and returns how many of its
// bytes the reader took. After it, the reader no longer touches the
// writer's slice.
func (r *ring) collect() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.taken
	r.pending, r.taken = nil, 0
	return n
}

func (r *ring) closeWriter() {
	r.mu.Lock()
	r.writerGone = true
	r.mu.Unlock()
	signal(r.readable)
}

func (r *ring) closeReader() {
	r.mu.Lock()
	r.readerGone = true
	r.buf, r.n, r.head = nil, 0, 0 // nobody will read it
	r.mu.Unlock()
	signal(r.writable)
}

// deadline is a settable point in time whose expiry closes a channel, so a
// blocked Read or Write selects on it.
type deadline struct {
	mu      sync.Mutex
	timer   *time.Timer
	expired chan struct{}
}

func (d *deadline) init() { d.expired = make(chan struct{}) }

// set arms the deadline at t; the zero time disarms it.
func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil && !d.timer.Stop() {
		<-d.expired // the timer fired: wait until its close is done
	}
	d.timer = nil
	closed := isClosed(d.expired)
	if t.IsZero() {
		if closed {
			d.expired = make(chan struct{})
		}
		return
	}
	if dur := time.Until(t); dur > 0 {
		if closed {
			d.expired = make(chan struct{})
		}
		c := d.expired
		d.timer = time.AfterFunc(dur, func() { close(c) })
		return
	}
	if !closed {
		close(d.expired)
	}
}

func (d *deadline) wait() chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.expired
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Conn is one end of a Pipe.
type Conn struct {
	rx, tx        *ring
	rd, wd        deadline
	local, remote Addr
	closeOnce     sync.Once
	done          chan struct{}
	// wmu serializes Writes: a ring lends one writer's slice at a time,
	// and concurrent Writes do not interleave their bytes.
	wmu sync.Mutex
}

// opError wraps err as a TCP conn does, so that a deadline's error is a
// net.Error whose Timeout() is true and errors.Is finds the sentinels.
func (c *Conn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: "memory", Source: c.local, Addr: c.remote, Err: err}
}

// Read reads buffered bytes, waiting for some while none are buffered.
func (c *Conn) Read(p []byte) (int, error) {
	for {
		select {
		case <-c.done:
			return 0, c.opError("read", net.ErrClosed)
		case <-c.rd.wait():
			return 0, c.opError("read", os.ErrDeadlineExceeded)
		default:
		}
		if len(p) == 0 {
			return 0, nil
		}
		n, err, wait := c.rx.read(p)
		if !wait {
			return n, err
		}
		select {
		case <-c.rx.readable:
		case <-c.done:
		case <-c.rd.wait():
		}
	}
}

// Write copies p into the ring, or straight to the reader, waiting while
// the ring is full.
func (c *Conn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	select {
	case <-c.done:
		return 0, c.opError("write", net.ErrClosed)
	case <-c.wd.wait():
		return 0, c.opError("write", os.ErrDeadlineExceeded)
	default:
	}
	written := 0
	for {
		n, err := c.tx.write(p[written:])
		written += n
		if err != nil {
			return written, c.opError("write", err)
		}
		if written == len(p) {
			return written, nil
		}
		var stop error
		select {
		case <-c.tx.writable:
		case <-c.done:
			stop = net.ErrClosed
		case <-c.wd.wait():
			stop = os.ErrDeadlineExceeded
		}
		written += c.tx.collect()
		if written == len(p) {
			return written, nil
		}
		if stop != nil {
			return written, c.opError("write", stop)
		}
	}
}

// Close closes this end: the other end reads what was written, then EOF.
func (c *Conn) Close() error {
	first := false
	c.closeOnce.Do(func() {
		first = true
		close(c.done)
		c.tx.closeWriter()
		c.rx.closeReader()
	})
	if !first {
		return c.opError("close", net.ErrClosed)
	}
	return nil
}

// LocalAddr returns this end's address.
func (c *Conn) LocalAddr() net.Addr { return c.local }

// RemoteAddr returns the other end's address.
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

// SetDeadline sets the read and write deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

// SetReadDeadline sets when a Read waiting for bytes gives up.
func (c *Conn) SetReadDeadline(t time.Time) error {
	if isClosed(c.done) {
		return c.opError("set", net.ErrClosed)
	}
	c.rd.set(t)
	return nil
}

// SetWriteDeadline sets when a Write waiting for room gives up.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	if isClosed(c.done) {
		return c.opError("set", net.ErrClosed)
	}
	c.wd.set(t)
	return nil
}
