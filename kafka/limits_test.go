package kafka

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/internal/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	fdChildDirEnv      = "IDEMLOG_FD_CHILD_DIR"
	fdChildMaxConnsEnv = "IDEMLOG_FD_CHILD_MAX_CONNECTIONS"
	// fdChildLimit is the child's RLIMIT_NOFILE: a few hundred client
	// connections exhaust it.
	fdChildLimit = 128
)

// TestServeLowDescriptorsChild is the child side of
// TestServerSurvivesDescriptorExhaustion: it serves a data dir with
// RLIMIT_NOFILE lowered to fdChildLimit, logs warnings and errors to stdout
// and prints "serve returned" if Serve ever does.
func TestServeLowDescriptorsChild(t *testing.T) {
	dir := os.Getenv(fdChildDirEnv)
	if dir == "" {
		t.Skip("child process of TestServerSurvivesDescriptorExhaustion")
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	rl.Cur = fdChildLimit
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	e, err := engine.Open(dir, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Logger: slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if v := os.Getenv(fdChildMaxConnsEnv); v != "" {
		setMaxConnections(&opts, v)
	}
	srv, err := New(e, opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("listening", ln.Addr())
	err = srv.Serve(ln)
	fmt.Println("serve returned:", err)
}

// setMaxConnections sets Options.MaxConnections from its decimal text.
func setMaxConnections(opts *Options, v string) {
	n, err := strconv.Atoi(v)
	if err != nil {
		panic(err)
	}
	opts.MaxConnections = n
}

// TestServerSurvivesDescriptorExhaustion: 300 clients connect to a server
// whose process may open 128 files and stay idle. The server keeps running
// (an accept that fails for want of descriptors is retried, not the end of
// Serve), and once those clients leave, a new client is answered. With the
// default max.connections (half the descriptors) the server stops accepting
// before it runs out; with no cap (-1) it runs out, logs it and waits.
func TestServerSurvivesDescriptorExhaustion(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a child process")
	}
	for _, tc := range []struct {
		name, maxConns string
		wantLog        string // a line the child must log, "" for none
	}{
		{"default max.connections", "", "max.connections reached"},
		{"no connection cap", "-1", "too many open files"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := []string{fdChildDirEnv + "=" + t.TempDir()}
			if tc.maxConns != "" {
				env = append(env, fdChildMaxConnsEnv+"="+tc.maxConns)
			}
			child := testutil.StartChild(t, "TestServeLowDescriptorsChild", env...)
			defer child.Abort()
			var addr string
			for l := range child.Lines {
				if a, ok := strings.CutPrefix(l, "listening "); ok {
					addr = a
					break
				}
			}
			if addr == "" {
				t.Fatal("child exited before serving")
			}
			var idle []net.Conn
			defer func() {
				for _, c := range idle {
					c.Close()
				}
			}()
			for range 300 {
				c, err := net.DialTimeout("tcp", addr, 5*time.Second)
				if err != nil {
					t.Fatalf("cannot dial after %d connections: %v", len(idle), err)
				}
				idle = append(idle, c)
			}
			// The server logs that it reached its limit and goes on; a
			// Serve that returned prints so and the child exits.
			timeout := time.After(10 * time.Second)
		wait:
			for {
				select {
				case l, ok := <-child.Lines:
					if !ok {
						t.Fatal("the server process exited with 300 idle clients connected")
					}
					if strings.HasPrefix(l, "serve returned") {
						t.Fatalf("the server stopped serving with 300 idle clients connected: %s", l)
					}
					if strings.Contains(l, tc.wantLog) {
						break wait
					}
				case <-timeout:
					t.Fatalf("no log line with %q after 300 connections", tc.wantLog)
				}
			}
			for _, c := range idle {
				c.Close()
			}
			idle = nil
			start := time.Now()
			rc := dial(t, addr)
			if resp := rc.roundTrip(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
				t.Fatalf("ApiVersions error %d", resp.ErrorCode)
			}
			t.Logf("a new client was answered %v after the idle ones closed", time.Since(start).Round(time.Millisecond))
			select {
			case l, ok := <-child.Lines:
				if !ok || strings.HasPrefix(l, "serve returned") {
					t.Fatalf("the server stopped serving: %q", l)
				}
			default:
			}
		})
	}
}

// With max.connections N, the N+1th client is not served until one of the
// N closes, and then it is: new connections wait in the listen backlog,
// holding no descriptor of the server's.
func TestMaxConnectionsWaitsForAClose(t *testing.T) {
	const limit = 4
	ts := startServer(t, Options{MaxConnections: limit})
	var open []*rawConn
	for range limit {
		rc := dial(t, ts.addr)
		rc.roundTrip(kmsg.NewPtrApiVersionsRequest())
		open = append(open, rc)
	}
	extra := dial(t, ts.addr)
	extra.send(kmsg.NewPtrApiVersionsRequest())
	extra.c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	var b [1]byte
	if n, err := extra.c.Read(b[:]); !isTimeout(err) {
		t.Fatalf("connection %d of max.connections %d: read %d bytes, %v; want no answer yet", limit+1, limit, n, err)
	}
	open[0].c.Close()
	extra.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp := kmsg.NewPtrApiVersionsResponse()
	extra.recv(resp)
	if resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions error %d", resp.ErrorCode)
	}
}

// With max.connections.per.ip N, one address's N+1th connection is closed
// at once, and a connection is allowed again once one of the N closes.
func TestMaxConnectionsPerIPClosesTheExtra(t *testing.T) {
	const limit = 3
	ts := startServer(t, Options{MaxConnectionsPerIP: limit})
	var open []*rawConn
	for range limit {
		rc := dial(t, ts.addr)
		rc.roundTrip(kmsg.NewPtrApiVersionsRequest())
		open = append(open, rc)
	}
	extra := dial(t, ts.addr)
	extra.expectClosed()
	open[0].c.Close()
	// The server notices the close asynchronously: retry for a while.
	deadline := time.Now().Add(10 * time.Second)
	for {
		rc := dial(t, ts.addr)
		rc.send(kmsg.NewPtrApiVersionsRequest())
		rc.c.SetReadDeadline(time.Now().Add(2 * time.Second))
		var size [4]byte
		if _, err := rc.c.Read(size[:]); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no connection allowed after one of the client's closed")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A client that sends a request a byte every 100 ms (slowloris) is closed
// once RequestTimeout has passed since the request's first byte, however
// steadily the bytes come: it cannot hold a connection and a frame buffer
// for a byte per IdleTimeout.
func TestSlowRequestClosedAtRequestTimeout(t *testing.T) {
	const requestTimeout = 500 * time.Millisecond
	ts := startServer(t, Options{RequestTimeout: requestTimeout})
	rc := dial(t, ts.addr)
	frame := []byte{0, 0, 0, 100} // a 100-byte request follows, slowly
	start := time.Now()
	closed := false
	for i := 0; time.Since(start) < 10*requestTimeout; i++ {
		b := byte(0)
		if i < len(frame) {
			b = frame[i]
		}
		if _, err := rc.c.Write([]byte{b}); err != nil {
			closed = true
			break
		}
		rc.c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		var got [1]byte
		if _, err := rc.c.Read(got[:]); err != nil && !isTimeout(err) {
			closed = true
			break
		}
	}
	took := time.Since(start)
	if !closed {
		t.Fatalf("a request sent a byte per 100 ms still open after %v; want it closed after the request timeout %v", took, requestTimeout)
	}
	if took < requestTimeout {
		t.Fatalf("closed after %v, before the request timeout %v", took, requestTimeout)
	}
	t.Logf("closed %v after the request's first byte", took.Round(time.Millisecond))
}
