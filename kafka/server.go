package kafka

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/errcode"
	"github.com/idemlog/idemlog/kafka/group"
	"github.com/idemlog/idemlog/pidtable"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Options configure a Server. Zero fields take the documented defaults.
type Options struct {
	// Advertise is the host:port clients are told to dial (Metadata,
	// FindCoordinator); empty: the listener's address.
	Advertise string
	// NodeID is the broker id the single node reports (0).
	NodeID int32
	// ClusterID is reported in Metadata ("idemlog").
	ClusterID string
	// MaxFrameSize caps a request frame; Kafka's socket.request.max.bytes
	// is 100 MiB, the default.
	MaxFrameSize int
	// MaxConnections caps the connections served at once, over all
	// listeners (Kafka's max.connections). At the cap Serve stops
	// accepting until a connection closes, as Kafka's acceptor does: new
	// clients wait in the listen backlog instead of taking descriptors.
	// 0: half of the process's open-file limit (RLIMIT_NOFILE), so that
	// the engine keeps descriptors for its files; negative: no cap.
	MaxConnections int
	// MaxConnectionsPerIP caps the connections of one client address
	// (Kafka's max.connections.per.ip): one over it is closed as soon as
	// it is accepted. 0 or negative: no cap, Kafka's default.
	MaxConnectionsPerIP int
	// RequestTimeout bounds how long a request frame may take to arrive
	// once its first byte has (a client trickling bytes holds its
	// connection for this long at most, not for IdleTimeout per byte), and
	// how long a Fetch may park: a larger MaxWaitMillis is cut to it.
	// Kafka's clients give up on a request after request.timeout.ms, 30 s,
	// the default; negative: no bound.
	RequestTimeout time.Duration
	// AutoCreateTopics creates a topic a client asks Metadata about, when
	// the request allows it (Kafka's auto.create.topics.enable), with
	// DefaultPartitions partitions (1). Off unless set (a bool has no
	// other zero value); `idemlog serve --auto-create` sets it by default,
	// as Kafka does.
	AutoCreateTopics  bool
	DefaultPartitions int
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
	// Registerer, if set, gets the server's Prometheus collectors.
	Registerer prometheus.Registerer
	// Group configures the consumer-group coordinator.
	Group group.Options
	// MaintainInterval is how often transaction timeouts are enforced and
	// expired producer and transactional ids dropped (1 s).
	MaintainInterval time.Duration
	// RetentionInterval is how often segments past their topic's retention
	// are deleted (Kafka's log.retention.check.interval.ms: 5 minutes).
	RetentionInterval time.Duration
	// MaxPipeline is how many requests of one connection may be decoded
	// and handled while earlier responses wait for their sync (8).
	MaxPipeline int
	// IdleTimeout closes a connection that has sent no request for this
	// long while none of its responses is pending (Kafka's
	// connections.max.idle.ms: 10 minutes); negative: never. A client
	// that vanished without a FIN would otherwise hold its goroutines and
	// buffers for good.
	IdleTimeout time.Duration
	// MaxOffsetMetadata is the longest metadata string an offset commit
	// may carry (Kafka's offset.metadata.max.bytes: 4096).
	MaxOffsetMetadata int
}

func (o Options) withDefaults() Options {
	if o.ClusterID == "" {
		o.ClusterID = "idemlog"
	}
	if o.MaxFrameSize <= 0 {
		o.MaxFrameSize = 100 << 20
	}
	if o.DefaultPartitions <= 0 {
		o.DefaultPartitions = 1
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaintainInterval <= 0 {
		o.MaintainInterval = time.Second
	}
	if o.RetentionInterval <= 0 {
		o.RetentionInterval = 5 * time.Minute
	}
	if o.MaxPipeline <= 0 {
		o.MaxPipeline = 8
	}
	if o.MaxOffsetMetadata <= 0 {
		o.MaxOffsetMetadata = 4096
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = 10 * time.Minute
	}
	if o.MaxConnections == 0 {
		o.MaxConnections = defaultMaxConnections()
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = 30 * time.Second
	}
	return o
}

// Server serves the Kafka protocol in front of one engine.
type Server struct {
	eng    *engine.Engine
	coord  *engine.Coordinator
	groups *group.Coordinator
	opts   Options
	log    *slog.Logger
	m      *metrics

	ctx    context.Context
	cancel context.CancelFunc

	// mu guards listeners and conns, for Close.
	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[net.Conn]struct{}
	closed    bool
	wg        sync.WaitGroup
	// perIP counts open connections by client host, for
	// MaxConnectionsPerIP (under mu).
	perIP map[string]int
	// slots holds a token per open connection, for MaxConnections; nil:
	// no cap.
	slots chan struct{}
	// mutations holds a token while a topic mutation runs in the engine
	// (mutations.go).
	mutations chan struct{}

	// Repeated failures are logged at most once per logLimitInterval each;
	// server errors per API, so that a failing produce does not hide a
	// failing topic creation.
	acceptLog, connLimitLog, ipLimitLog, producerLimitLog logLimiter
	serverErrLog                                          [128]logLimiter

	// host and port are what Metadata advertises; set by the first Serve
	// when Options.Advertise is empty (under mu, read by handlers after).
	host string
	port int32
}

// New returns a server for e. The engine stays the caller's: Close does
// not close it.
func New(e *engine.Engine, opts Options) (*Server, error) {
	opts = opts.withDefaults()
	coord, err := e.Frontend().Coordinator()
	if err != nil {
		return nil, fmt.Errorf("cannot start server: %w", err)
	}
	if opts.Group.Logger == nil {
		opts.Group.Logger = opts.Logger
	}
	s := &Server{eng: e, coord: coord, opts: opts, log: opts.Logger,
		groups:    group.New(opts.Group),
		listeners: map[net.Listener]struct{}{}, conns: map[net.Conn]struct{}{}, perIP: map[string]int{},
		mutations: make(chan struct{}, 1)}
	if opts.MaxConnections > 0 {
		s.slots = make(chan struct{}, opts.MaxConnections)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if opts.Advertise != "" {
		if err := s.setAdvertised(opts.Advertise); err != nil {
			return nil, err
		}
	}
	s.m = newMetrics(s)
	if opts.Registerer != nil {
		if err := s.m.register(opts.Registerer); err != nil {
			return nil, fmt.Errorf("cannot register metrics: %w", err)
		}
	}
	s.wg.Add(1)
	go s.maintain()
	return s, nil
}

func (s *Server) setAdvertised(hostport string) error {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return fmt.Errorf("cannot parse advertised address %q: %w", hostport, err)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return fmt.Errorf("cannot parse advertised port %q: %w", port, err)
	}
	s.host, s.port = host, int32(p)
	return nil
}

func (s *Server) advertised() (string, int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.host, s.port
}

// Serve accepts connections on ln until Close. It returns nil after Close,
// also when Close came first (then it closes ln at once).
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		// A Close that won the race with a Serve started beside it is
		// the same stop. (CI: a short test's cleanup closed the server
		// before its Serve goroutine ran and got an error.)
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	if s.host == "" {
		// No advertised host: the listener's. An advertised port given
		// with it (":19999") is kept. (Without this: it was replaced.)
		port := s.port
		if err := s.setAdvertised(ln.Addr().String()); err != nil {
			s.mu.Unlock()
			return err
		}
		if port > 0 {
			s.port = port
		}
	}
	s.listeners[ln] = struct{}{}
	s.mu.Unlock()
	s.log.Info("serving kafka protocol", "addr", ln.Addr().String())
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
	}()
	var delay time.Duration
	for {
		if !s.takeConnSlot() {
			return nil // closed
		}
		nc, err := ln.Accept()
		if err != nil {
			s.freeConnSlot()
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("cannot accept: %w", err)
			}
			// Anything else (EMFILE, ENFILE, ENOBUFS, ECONNABORTED) passes:
			// the server waits and accepts again.
			delay = acceptDelay(delay)
			s.acceptLog.log(s.log, slog.LevelError, "cannot accept connection; retrying", "err", err, "retry_in", delay)
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-s.ctx.Done():
			}
			t.Stop()
			continue
		}
		delay = 0
		host := clientHost(nc.RemoteAddr())
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			s.freeConnSlot()
			return nil
		}
		if limit := s.opts.MaxConnectionsPerIP; limit > 0 && s.perIP[host] >= limit {
			s.mu.Unlock()
			nc.Close()
			s.freeConnSlot()
			s.m.refusedConns.Inc()
			s.ipLimitLog.log(s.log, slog.LevelWarn, "closing connection over max.connections.per.ip", "client", host, "max", limit)
			continue
		}
		s.perIP[host]++
		s.conns[nc] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(nc, host)
	}
}

// takeConnSlot waits until fewer than MaxConnections connections are open
// and takes a slot for the next one; false if the server closed meanwhile.
func (s *Server) takeConnSlot() bool {
	if s.slots == nil {
		return true
	}
	select {
	case s.slots <- struct{}{}:
		return true
	default:
	}
	s.connLimitLog.log(s.log, slog.LevelWarn, "max.connections reached: not accepting until a connection closes", "max", cap(s.slots))
	select {
	case s.slots <- struct{}{}:
		return true
	case <-s.ctx.Done():
		return false
	}
}

func (s *Server) freeConnSlot() {
	if s.slots != nil {
		<-s.slots
	}
}

// Close stops accepting, closes every connection (parked fetches and group
// joins return at once) and waits for their goroutines. Requests being
// handled finish first: an append either completes or never started.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for ln := range s.listeners {
		ln.Close()
	}
	for c := range s.conns {
		// Closing the read side only: a response in flight still goes out,
		// unless the client stops reading: a write deadline bounds that,
		// so a stuck client cannot hold shutdown (SIGTERM) forever.
		if tc, ok := c.(*net.TCPConn); ok {
			tc.CloseRead()
			tc.SetWriteDeadline(time.Now().Add(closeWriteGrace))
		} else {
			c.Close()
		}
	}
	s.mu.Unlock()
	s.cancel()
	s.groups.Close()
	s.wg.Wait()
	return nil
}

// maintain enforces transaction timeouts (an expired transaction is
// aborted with a bumped epoch, fencing its producer), drops producers and
// transactional ids past their expiration, and applies retention.
func (s *Server) maintain() {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.MaintainInterval)
	defer t.Stop()
	lastRetention := time.Now()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		if time.Since(lastRetention) >= s.opts.RetentionInterval {
			lastRetention = time.Now()
			if n, err := s.eng.Frontend().ApplyRetention(); err != nil {
				s.log.Warn("cannot apply retention", "err", err)
			} else if n > 0 {
				s.log.Info("retention deleted segments", "count", n)
			}
		}
		if n, err := s.coord.AbortTimedOut(); err != nil {
			s.log.Warn("cannot abort timed-out transactions", "err", err)
		} else if n > 0 {
			s.log.Info("aborted timed-out transactions", "count", n)
		}
		s.eng.Frontend().ExpireProducers()
		if _, err := s.coord.ExpireTransactionalIDs(); err != nil {
			s.log.Warn("cannot expire transactional ids", "err", err)
		}
		// A group with offsets (committed or pending in a transaction) is
		// kept, as Kafka keeps it until they expire.
		s.groups.ForgetEmptyGroups(func(group string) bool {
			got, err := s.eng.Frontend().FetchOffsets(group, nil, true)
			return err != nil || len(got) > 0
		})
	}
}

// pending is a handled request whose response may still wait for a sync:
// the connection's writer runs finish (which may wait, and may set error
// codes in resp), encodes resp and then runs release (which returns read
// chunks to their segments). resp nil: no response (acks=0).
type pending struct {
	correlation int32
	resp        kmsg.Response
	finish      func()
	release     func()
	// size is a lower bound of the encoded response (a fetch's record
	// bytes), so the writer sizes its buffer once instead of growing it
	// by doubling while kmsg appends.
	size int
	// closeAfter: the connection closes once the responses before this
	// one are written (an acks=0 produce that failed).
	closeAfter bool
}

// serveConn reads, handles and answers one connection's requests in order.
// Requests are decoded and handled one at a time, as Kafka does; responses
// go to a writer goroutine, so a produce's wait for its sync overlaps the
// handling of the requests behind it (clients pipeline up to 5 produces),
// and syncs of one connection's produces group. Buffers are pooled and held
// only while a request or response needs them (buffers.go).
func (s *Server) serveConn(nc net.Conn, host string) {
	defer s.wg.Done()
	s.m.conns.Inc()
	defer s.m.conns.Dec()
	log := s.log.With("remote", nc.RemoteAddr().String())
	log.Debug("connection opened")
	ctx, cancel := context.WithCancel(group.WithClientHost(s.ctx, host))
	out := make(chan pending, s.opts.MaxPipeline)
	// pendingResponses counts requests handed to the writer and not yet
	// answered: while one is, the connection is not idle. The reader adds
	// before the send on out and the writer subtracts after the response
	// is written, so a reader that loads 0 knows every answer is out.
	var pendingResponses atomic.Int32
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		s.writeResponses(nc, out, &pendingResponses, cancel, log)
	}()
	r := &connReader{nc: nc}
	var buf []byte // the frame being read and handled; pooled
	defer func() {
		close(out)
		<-writerDone
		cancel()
		nc.Close()
		putBuf(buf)
		r.release()
		s.mu.Lock()
		delete(s.conns, nc)
		if s.perIP[host]--; s.perIP[host] <= 0 {
			delete(s.perIP, host)
		}
		s.mu.Unlock()
		s.freeConnSlot()
		log.Debug("connection closed")
	}()
	for {
		if err := s.awaitRequest(nc, r, &pendingResponses); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				log.Debug("closing idle connection", "idle", s.opts.IdleTimeout)
			}
			return
		}
		frame, b, err := readFrame(r, buf, s.opts.MaxFrameSize)
		buf = b
		if err != nil {
			switch {
			case errors.Is(err, os.ErrDeadlineExceeded):
				log.Info("closing connection: request not received within the request timeout",
					"request_timeout", s.opts.RequestTimeout, "received", len(buf))
				s.m.badFrames.Inc()
			case !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && ctx.Err() == nil:
				log.Info("closing connection", "err", err)
				s.m.badFrames.Inc()
			}
			return
		}
		s.m.bytesIn.Add(float64(len(frame) + 4))
		h, req, err := parseRequest(frame)
		if err != nil {
			if errors.Is(err, ErrUnsupportedVersion) && h.key == kmsg.ApiVersions.Int16() {
				s.m.observe(h.key, 0) // counted as a request, as its error is
				putBuf(buf)
				buf = nil
				pendingResponses.Add(1)
				out <- pending{correlation: h.correlation, resp: s.apiVersionsFallback()}
				continue
			}
			log.Info("closing connection", "err", err, "key", h.key, "version", h.version, "client", h.clientID)
			s.m.badFrames.Inc()
			return
		}
		if ctx.Err() != nil {
			// Read ahead of a Close or a failed write: not handled, as
			// Kafka mutes a closing channel.
			return
		}
		stopWatch := watchDisconnect(nc, r, req, cancel)
		p, ok := s.handleSafely(ctx, h, req, log)
		stopWatch()
		// The request's bytes are no longer read once it is handled: a
		// response holds copies (or segment chunks), never the frame.
		putBuf(buf)
		buf = nil
		if !ok {
			return
		}
		p.correlation = h.correlation
		pendingResponses.Add(1)
		// A handled request's response goes out while the writer has
		// room, even once the context is done (a JoinGroup that Close
		// ended answers COORDINATOR_NOT_AVAILABLE): a select of both
		// cases picked at random and dropped it half the time.
		select {
		case out <- p:
		default:
			select {
			case out <- p:
			case <-ctx.Done():
				if p.release != nil {
					p.release()
				}
				return
			}
		}
		if p.closeAfter {
			log.Debug("closing connection after a failed acks=0 produce")
			return
		}
	}
}

// mayPark reports whether handling req may wait for something other than
// the connection: a Fetch with a wait, a JoinGroup, a SyncGroup or a topic
// mutation (its turn, mutations.go).
func mayPark(req kmsg.Request) bool {
	switch r := req.(type) {
	case *kmsg.FetchRequest:
		return r.MaxWaitMillis > 0
	case *kmsg.JoinGroupRequest, *kmsg.SyncGroupRequest:
		return true
	}
	return isMutation(req)
}

// watchDisconnect reads ahead on nc while req, which may park, is handled,
// so that a client that disconnects cancels its parked request (through
// cancel, the connection's context) at once: without it, nobody reads the
// socket during the wait, and the goroutines, descriptor and buffers of a
// departed client stay until the wait ends. The returned stop ends the
// watch; a byte the watch read stays in r for the next request.
func watchDisconnect(nc net.Conn, r *connReader, req kmsg.Request, cancel func()) (stop func()) {
	if !mayPark(req) || r.buffered() > 0 {
		// Nothing to wait for, or the client has sent more already.
		return func() {}
	}
	if err := nc.SetReadDeadline(time.Time{}); err != nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := r.awaitByte(); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			cancel()
		}
	}()
	return func() {
		nc.SetReadDeadline(time.Unix(1, 0)) // ends the read at once
		<-done
	}
}

// closeWriteGrace is how long Close lets responses in flight reach clients.
const closeWriteGrace = 5 * time.Second

// writeBufferSize is the buffer through which a connection's responses are
// written, so that pipelined responses share a write.
const writeBufferSize = 64 << 10

var writerPool = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, writeBufferSize) }}

// writeResponses is a connection's writer: in request order it completes
// each response, encodes it and writes; it flushes when no response is
// ready behind the one written, so pipelined responses share a write. Its
// buffered writer is taken from a pool for each run of responses and given
// back once they are flushed: an idle connection holds none.
func (s *Server) writeResponses(nc net.Conn, in <-chan pending, unanswered *atomic.Int32, cancel func(), log *slog.Logger) {
	var w *bufio.Writer
	putWriter := func() {
		if w != nil {
			w.Reset(nil)
			writerPool.Put(w)
			w = nil
		}
	}
	defer putWriter()
	failed := false
	for p := range in {
		if w == nil {
			w = writerPool.Get().(*bufio.Writer)
			w.Reset(nc)
		}
		if p.finish != nil && w.Buffered() > 0 && !failed {
			// This response may wait (a produce's sync): what is written
			// before it goes out now, not after that wait.
			if err := w.Flush(); err != nil {
				failed = true
				nc.Close()
			}
		}
		if !s.writeResponse(w, p, failed, log) {
			if !failed {
				nc.Close() // the reader must not wait for more requests
			}
			failed = true
		}
		if p.release != nil {
			p.release()
		}
		if !failed && len(in) == 0 {
			if err := w.Flush(); err != nil {
				failed = true
			}
		}
		if failed {
			// The reader sees its context cancelled; the loop keeps
			// draining so every chunk is released.
			cancel()
			log.Debug("cannot write response; closing")
		}
		if len(in) == 0 || failed {
			putWriter()
		}
		unanswered.Add(-1)
	}
}

// writeResponse completes p (a produce waits for its sync), encodes it into
// a pooled buffer and writes it to w, unless an earlier write failed; false
// if this write fails or finishing or encoding panics (a bug, logged and
// counted like a handler's: the connection is closed, the process lives
// on).
func (s *Server) writeResponse(w *bufio.Writer, p pending, failed bool, log *slog.Logger) (ok bool) {
	defer func() {
		if v := recover(); v != nil {
			s.m.panics.Inc()
			log.Error("BUG: completing a response panicked; closing the connection",
				"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			ok = false
		}
	}()
	if p.finish != nil {
		p.finish()
	}
	if p.resp == nil || failed {
		return true
	}
	// The buffer comes from the pool shared by all connections: a
	// consumer's large fetches reuse one instead of growing a new one by
	// doubling each time (the garbage drove a GC cycle per fetch in
	// bench/peers, 4 partitions x 1 MiB), and no connection keeps one.
	enc := appendResponse(getBuf(p.size+64<<10), p.correlation, p.resp)
	defer putBuf(enc)
	s.m.bytesOut.Add(float64(len(enc)))
	// A large response goes straight to the socket, not through the bufio
	// buffer (Write does that by itself once the buffer is empty).
	_, err := w.Write(enc)
	return err == nil
}

// awaitRequest waits, at most IdleTimeout (Kafka's connections.max.idle.ms),
// for the first byte of the next request, starting again while responses
// are pending; then it gives the rest of that request's frame
// RequestTimeout to arrive. A client that stalls halfway through a request,
// or sends it a byte at a time, is as good as gone.
func (s *Server) awaitRequest(nc net.Conn, r *connReader, unanswered *atomic.Int32) error {
	if r.buffered() == 0 {
		for {
			var idle time.Time
			if s.opts.IdleTimeout >= 0 {
				idle = time.Now().Add(s.opts.IdleTimeout)
			}
			if err := nc.SetReadDeadline(idle); err != nil {
				return err
			}
			err := r.awaitByte()
			if err == nil {
				break
			}
			if !errors.Is(err, os.ErrDeadlineExceeded) || unanswered.Load() == 0 {
				return err
			}
		}
	}
	var frame time.Time
	if s.opts.RequestTimeout > 0 {
		frame = time.Now().Add(s.opts.RequestTimeout)
	}
	return nc.SetReadDeadline(frame)
}

// handleSafely is handle, with a panic (a bug) confined to its
// connection: it is logged with its stack and the connection closed, and
// the server goes on serving everyone else.
func (s *Server) handleSafely(ctx context.Context, h header, req kmsg.Request, log *slog.Logger) (p pending, ok bool) {
	defer func() {
		if v := recover(); v != nil {
			s.m.panics.Inc()
			log.Error("BUG: request handler panicked; closing the connection",
				"key", h.key, "version", h.version, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			ok = false
		}
	}()
	return s.handle(ctx, h, req), true
}

// handle runs one request and returns its response.
func (s *Server) handle(ctx context.Context, h header, req kmsg.Request) pending {
	start := time.Now()
	key := h.key
	var p pending
	switch r := req.(type) {
	case *kmsg.ApiVersionsRequest:
		p.resp = s.apiVersions(r)
	case *kmsg.MetadataRequest:
		p.resp = s.metadata(ctx, r)
	case *kmsg.FindCoordinatorRequest:
		p.resp = s.findCoordinator(r)
	case *kmsg.ProduceRequest:
		p = s.produce(r)
	case *kmsg.FetchRequest:
		p = s.fetch(ctx, r)
	case *kmsg.ListOffsetsRequest:
		p.resp = s.listOffsets(r)
	case *kmsg.InitProducerIDRequest:
		p.resp = s.initProducerID(r)
	case *kmsg.AddPartitionsToTxnRequest:
		p.resp = s.addPartitionsToTxn(r)
	case *kmsg.AddOffsetsToTxnRequest:
		p.resp = s.addOffsetsToTxn(r)
	case *kmsg.EndTxnRequest:
		p.resp = s.endTxn(r)
	case *kmsg.TxnOffsetCommitRequest:
		p.resp = s.txnOffsetCommit(r)
	case *kmsg.OffsetCommitRequest:
		p.resp = s.offsetCommit(r)
	case *kmsg.OffsetFetchRequest:
		p.resp = s.offsetFetch(r)
	case *kmsg.JoinGroupRequest:
		p.resp = s.groups.JoinGroup(group.WithClientID(ctx, h.clientID), r)
	case *kmsg.SyncGroupRequest:
		p.resp = s.groups.SyncGroup(ctx, r)
	case *kmsg.HeartbeatRequest:
		p.resp = s.groups.Heartbeat(r)
	case *kmsg.LeaveGroupRequest:
		p.resp = s.groups.LeaveGroup(r)
	case *kmsg.CreateTopicsRequest:
		p.resp = s.createTopics(ctx, r)
	case *kmsg.DeleteTopicsRequest:
		p.resp = s.deleteTopics(ctx, r)
	case *kmsg.DeleteGroupsRequest:
		p.resp = s.deleteGroups(r)
	case *kmsg.ListGroupsRequest:
		p.resp = s.listGroups(r)
	case *kmsg.DescribeGroupsRequest:
		p.resp = s.describeGroups(r)
	case *kmsg.DescribeConfigsRequest:
		p.resp = s.describeConfigs(r)
	case *kmsg.DeleteRecordsRequest:
		p.resp = s.deleteRecords(r)
	case *kmsg.CreatePartitionsRequest:
		p.resp = s.createPartitions(ctx, r)
	case *kmsg.AlterConfigsRequest:
		p.resp = s.alterConfigs(ctx, r)
	case *kmsg.IncrementalAlterConfigsRequest:
		p.resp = s.incrementalAlterConfigs(ctx, r)
	default:
		panic(fmt.Sprintf("BUG: advertised key %d has no handler", key))
	}
	s.m.observe(key, time.Since(start))
	return p
}

// code maps err to its Kafka error code and counts it under the request's
// key; every error a response carries goes through here.
func (s *Server) code(key kmsg.Key, err error) int16 {
	c := errCode(err)
	if c != 0 {
		s.m.errors.WithLabelValues(key.Name(), strconv.Itoa(int(c))).Inc()
		s.logServerError(key, c, err)
	}
	return c
}

// logServerError logs, rate-limited, the errors that are the server's
// (storage, an unexpected failure) or a limit the operator sets (producers
// per partition): a client is told the code, the operator must learn it
// too, without a line per request while a disk stays full.
func (s *Server) logServerError(key kmsg.Key, c int16, err error) {
	lim := &s.serverErrLog[int(key)%len(s.serverErrLog)]
	switch {
	case c == errcode.KafkaStorageError:
		lim.log(s.log, slog.LevelError, "storage error", "api", key.Name(), "err", err)
	case c == errcode.UnknownServerError:
		lim.log(s.log, slog.LevelError, "request failed on the server", "api", key.Name(), "err", err)
	case errors.Is(err, pidtable.ErrTooManyProducers):
		s.producerLimitLog.log(s.log, slog.LevelWarn, "partition refuses new producers", "err", err)
	}
}

// clientHost is how Kafka writes a client's address in DescribeGroups:
// "/" and the IP address (Java's InetAddress.toString with no host name),
// an IPv6 one with all eight groups, none compressed, as Java's
// Inet6Address.getHostAddress writes it.
func clientHost(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		if ta.IP.To4() != nil || len(ta.IP) != net.IPv6len {
			return "/" + ta.IP.String()
		}
		groups := make([]string, 8)
		for i := range groups {
			groups[i] = strconv.FormatUint(uint64(ta.IP[2*i])<<8|uint64(ta.IP[2*i+1]), 16)
		}
		host := strings.Join(groups, ":")
		if ta.Zone != "" {
			host += "%" + ta.Zone
		}
		return "/" + host
	}
	if host, _, err := net.SplitHostPort(a.String()); err == nil {
		return "/" + host
	}
	return "/" + a.String()
}
