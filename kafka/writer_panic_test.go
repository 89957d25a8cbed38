package kafka

import (
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A panic while a response is completed (a bug) closes that connection
// and is counted; the process lives on, and the responses queued behind
// it are still released.
func TestWriterPanicClosesConnection(t *testing.T) {
	ts := startServer(t, Options{})
	server, client := net.Pipe()
	defer client.Close()
	in := make(chan pending, 4)
	var unanswered atomic.Int32
	cancelled := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var once sync.Once
		cancel := func() { once.Do(func() { close(cancelled) }) } // a context's cancel: idempotent
		ts.srv.writeResponses(server, in, &unanswered, cancel, slog.New(slog.DiscardHandler))
	}()
	released := 0
	unanswered.Add(2)
	in <- pending{finish: func() { panic("boom") }, resp: kmsg.NewPtrApiVersionsResponse(),
		release: func() { released++ }}
	in <- pending{resp: kmsg.NewPtrApiVersionsResponse(), release: func() { released++ }}
	close(in)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("writer did not finish")
	}
	if released != 2 {
		t.Fatalf("%d of 2 responses released", released)
	}
	if n := unanswered.Load(); n != 0 {
		t.Fatalf("%d responses still counted as pending", n)
	}
	select {
	case <-cancelled:
	default:
		t.Fatal("connection's context not cancelled")
	}
	client.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := client.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("client read %v, want EOF (connection closed, nothing written)", err)
	}
}

// Serve after Close returns nil at once, as Serve ended by Close does: a
// server closed before its Serve goroutine ran is a stop, not a failure.
func TestServeAfterCloseReturnsNil(t *testing.T) {
	ts := startServer(t, Options{})
	ts.srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.srv.Serve(ln); err != nil {
		t.Fatalf("Serve after Close: %v, want nil", err)
	}
	if _, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		t.Fatal("the listener given to Serve after Close is still open")
	}
}
