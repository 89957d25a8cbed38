package kafka

import (
	"context"
	"fmt"
	"net"

	"github.com/idemlog/idemlog/internal/memconn"
)

// inprocServerAddr and inprocClientAddr name the ends of an in-process
// connection (a client's host, as consumer groups report it, is
// "/inproc").
const (
	inprocServerAddr memconn.Addr = "inproc:0"
	inprocClientAddr memconn.Addr = "inproc:1"
)

// Dial connects a Kafka client to the server without a socket: it returns
// one end of an in-memory connection whose other end is served by the same
// per-connection code as an accepted TCP connection (framing, pipelining,
// idle timeout, Close). Its shape is franz-go's kgo.Dialer and net/http's
// DialContext, so an embedding program runs an unmodified Kafka client
// against its embedded engine with
//
//	kgo.NewClient(kgo.SeedBrokers("idemlog"), kgo.Dialer(srv.Dial), ...)
//
// and against a Kafka cluster by changing the seeds and dropping the
// dialer. network and addr are ignored: every address the client dials
// (the seed, and the broker Metadata advertises) is this server. The
// server needs no Serve for it; when it has none, Metadata advertises
// Options.Advertise, or an empty host and port 0, which the client only
// hands back to Dial.
//
// Each direction of the connection is a buffered ring (see
// internal/memconn), so the client's next requests and the server's
// responses overlap as on a socket, without the system calls. Dial fails
// with net.ErrClosed after Close.
func (s *Server) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("cannot dial in-process: %w", err)
	}
	// An in-process connection counts against max.connections like a
	// socket (it holds the same per-connection state), but not against
	// max.connections.per.ip: every in-process client is the one host.
	if !s.takeConnSlot() {
		return nil, fmt.Errorf("cannot dial in-process: %w", net.ErrClosed)
	}
	client, server := memconn.Pipe(0, inprocClientAddr, inprocServerAddr)
	host := clientHost(server.RemoteAddr())
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.freeConnSlot()
		return nil, fmt.Errorf("cannot dial in-process: %w", net.ErrClosed)
	}
	s.perIP[host]++
	s.conns[server] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	go s.serveConn(server, host)
	return client, nil
}
