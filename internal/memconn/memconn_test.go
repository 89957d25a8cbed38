package memconn

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// TestPipeCarriesBytesInOrderBothWays streams more than the ring holds in
// both directions at once, with writes and reads of random sizes, so that
// the ring wraps many times and a full ring blocks a writer
// while its reader drains.
func TestPipeCarriesBytesInOrderBothWays(t *testing.T) {
	a, b := Pipe(1000, "a", "b")
	defer a.Close()
	defer b.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	ab := make([]byte, 300_000)
	ba := make([]byte, 200_000)
	for i := range ab {
		ab[i] = byte(rng.Uint32())
	}
	for i := range ba {
		ba[i] = byte(rng.Uint32())
	}
	var wg sync.WaitGroup
	send := func(c net.Conn, data []byte, seed uint64) {
		defer wg.Done()
		r := rand.New(rand.NewPCG(seed, 0))
		for len(data) > 0 {
			n := min(len(data), 1+r.IntN(3000))
			w, err := c.Write(data[:n])
			if err != nil || w != n {
				t.Errorf("Write = %d, %v; want %d", w, err, n)
				return
			}
			data = data[n:]
		}
	}
	recv := func(c net.Conn, want []byte, seed uint64) {
		defer wg.Done()
		r := rand.New(rand.NewPCG(seed, 1))
		got := make([]byte, 0, len(want))
		buf := make([]byte, 4000)
		for len(got) < len(want) {
			n, err := c.Read(buf[:1+r.IntN(len(buf)-1)])
			if err != nil {
				t.Errorf("Read after %d bytes: %v", len(got), err)
				return
			}
			got = append(got, buf[:n]...)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("received bytes differ from those sent")
		}
	}
	wg.Add(4)
	go send(a, ab, 3)
	go recv(b, ab, 4)
	go send(b, ba, 5)
	go recv(a, ba, 6)
	wg.Wait()
}

// TestWriteReturnsBeforeRead checks the buffering that net.Pipe lacks: a
// write that fits the ring completes with nobody reading.
func TestWriteReturnsBeforeRead(t *testing.T) {
	a, b := Pipe(64, "a", "b")
	defer a.Close()
	defer b.Close()
	a.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if n, err := a.Write(make([]byte, 64)); n != 64 || err != nil {
		t.Fatalf("Write into an empty ring = %d, %v; want 64, nil", n, err)
	}
	// The ring is full: the next write waits, until its deadline.
	a.SetWriteDeadline(time.Now().Add(20 * time.Millisecond))
	n, err := a.Write([]byte{1})
	if n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Write into a full ring = %d, %v; want 0, deadline exceeded", n, err)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("deadline error %v is not a net.Error with Timeout()", err)
	}
}

// TestReadDeadline checks that a waiting Read gives up at its deadline, a
// deadline in the past fails at once, and a later deadline (or none)
// makes the conn usable again, as kgo and the server's idle timeout
// expect of a TCP conn.
func TestReadDeadline(t *testing.T) {
	a, b := Pipe(0, "a", "b")
	defer a.Close()
	defer b.Close()
	buf := make([]byte, 8)
	start := time.Now()
	b.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
	if _, err := b.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read past deadline: %v; want deadline exceeded", err)
	}
	if d := time.Since(start); d < 25*time.Millisecond {
		t.Fatalf("Read returned after %v, before its 30ms deadline", d)
	}
	a.Write([]byte("x"))
	b.SetReadDeadline(time.Now().Add(-time.Second))
	if _, err := b.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read with a past deadline: %v; want deadline exceeded", err)
	}
	b.SetReadDeadline(time.Time{})
	if n, err := b.Read(buf); n != 1 || err != nil {
		t.Fatalf("Read after clearing the deadline = %d, %v; want 1, nil", n, err)
	}
	// A deadline moved later while a Read waits is the one that counts.
	b.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	go func() {
		time.Sleep(5 * time.Millisecond)
		b.SetReadDeadline(time.Now().Add(time.Hour))
		time.Sleep(40 * time.Millisecond)
		a.Write([]byte("y"))
	}()
	if n, err := b.Read(buf); n != 1 || err != nil || buf[0] != 'y' {
		t.Fatalf("Read after an extended deadline = %d, %v; want the byte written after the first deadline", n, err)
	}
}

// TestCloseDrainsThenEOF checks what each end sees once one closes: the
// other reads what was written before the close, then io.EOF, and its
// writes fail; the closed end's own calls fail with net.ErrClosed, also a
// Read that was waiting when Close came.
func TestCloseDrainsThenEOF(t *testing.T) {
	a, b := Pipe(0, "a", "b")
	a.Write([]byte("last words"))
	waiting := make(chan error, 1)
	go func() {
		_, err := a.Read(make([]byte, 1))
		waiting <- err
	}()
	time.Sleep(5 * time.Millisecond)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-waiting; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Read waiting at Close: %v; want net.ErrClosed", err)
	}
	got, err := io.ReadAll(b)
	if err != nil || string(got) != "last words" {
		t.Fatalf("ReadAll of the other end = %q, %v; want the bytes written before Close", got, err)
	}
	if _, err := b.Write([]byte("x")); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("Write to a closed peer: %v; want io.ErrClosedPipe", err)
	}
	if _, err := a.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write on a closed end: %v; want net.ErrClosed", err)
	}
	if err := a.Close(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("second Close: %v; want net.ErrClosed", err)
	}
	if err := a.SetDeadline(time.Now()); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("SetDeadline on a closed end: %v; want net.ErrClosed", err)
	}
	if a.LocalAddr().String() != "a" || a.RemoteAddr().String() != "b" || b.LocalAddr().String() != "b" {
		t.Fatalf("addresses: a %v->%v, b %v", a.LocalAddr(), a.RemoteAddr(), b.LocalAddr())
	}
}

// TestWriteBlockedOnFullRingEndsWhenReaderCloses: a writer waiting for
// room must not wait for ever once nobody will read.
func TestWriteBlockedOnFullRingEndsWhenReaderCloses(t *testing.T) {
	a, b := Pipe(16, "a", "b")
	defer a.Close()
	done := make(chan error, 1)
	go func() {
		_, err := a.Write(make([]byte, 100))
		done <- err
	}()
	time.Sleep(5 * time.Millisecond)
	b.Close()
	select {
	case err := <-done:
		if !errors.Is(err, io.ErrClosedPipe) {
			t.Fatalf("Write: %v; want io.ErrClosedPipe", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Write still blocked after the reader closed")
	}
}

func BenchmarkPipe(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			x, y := Pipe(0, "a", "b")
			defer x.Close()
			defer y.Close()
			msg := make([]byte, size)
			b.SetBytes(int64(size))
			go func() {
				buf := make([]byte, 1<<20)
				for {
					if _, err := y.Read(buf); err != nil {
						return
					}
				}
			}()
			for b.Loop() {
				x.Write(msg)
			}
			b.StopTimer()
		})
	}
}

// TestWriteLargerThanRingCountsWhatWasTaken: a Write larger than the ring
// lends its rest to the reader; when its deadline ends it, it must report
// exactly the bytes that left it (those in the ring and those the reader
// copied straight from its slice), and the reader must then find exactly
// the bytes that follow, in order. Miscounting either way would lose or
// repeat bytes of the stream.
func TestWriteLargerThanRingCountsWhatWasTaken(t *testing.T) {
	a, b := Pipe(100, "a", "b")
	defer a.Close()
	defer b.Close()
	data := make([]byte, 10_000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	a.SetWriteDeadline(time.Now().Add(300 * time.Millisecond))
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := a.Write(data)
		done <- result{n, err}
	}()
	got := make([]byte, 0, len(data))
	buf := make([]byte, 500)
	for len(got) < 500 {
		n, err := b.Read(buf[:500-len(got)])
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, buf[:n]...)
	}
	r := <-done
	if !errors.Is(r.err, os.ErrDeadlineExceeded) {
		t.Fatalf("Write: %d, %v; want a deadline error", r.n, r.err)
	}
	if r.n < 500 || r.n > 600 {
		t.Fatalf("Write reported %d bytes; 500 were read and the ring holds at most 100 more", r.n)
	}
	b.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	for {
		n, err := b.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatal(err)
			}
			break
		}
	}
	if len(got) != r.n || !bytes.Equal(got, data[:r.n]) {
		t.Fatalf("reader got %d bytes (equal to the first written: %v); Write reported %d", len(got), bytes.Equal(got, data[:len(got)]), r.n)
	}
}
