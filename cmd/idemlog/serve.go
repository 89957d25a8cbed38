package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"syscall"
	"time"

	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/kafka"
	"github.com/idemlog/idemlog/kafka/group"
	"github.com/idemlog/idemlog/partition"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

const serveSynopsis = "Usage: idemlog serve [flags]\n"

const serveAbout = `
Serve the Kafka protocol on --listen in front of an engine in --dir, so that
unmodified Kafka clients (franz-go, sarama, librdkafka/kcat, the Java
client) produce idempotently and transactionally, consume with
read_committed and run consumer groups against it. One node: every
partition's leader, replica set and ISR is this node.

The first line on stdout is "listening on HOST:PORT" (useful with port 0).
SIGTERM or SIGINT stops accepting, lets requests in progress finish, and
closes the engine cleanly (clean-shutdown markers, producer snapshots), so
the next start opens without recovery.
`

func runServe(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("serve")
	listen := fs.String("listen", "127.0.0.1:9092", "accept Kafka clients on `ADDR`")
	dir := fs.String("dir", "", "data `DIR` (required)")
	fsync := fs.String("fsync", "never", "sync `POLICY`: never, always, interval=DUR or bytes=N")
	advertise := fs.String("advertise", "", "`HOST:PORT` clients are told to dial (default: the listening address)")
	metricsAddr := fs.String("metrics", "", "serve Prometheus metrics on http://`ADDR`/metrics")
	pprofOn := fs.Bool("pprof", false, "also serve Go's runtime profiles (goroutines, heap, CPU) under /debug/pprof/ on the --metrics address")
	autoCreate := fs.Bool("auto-create", true, "create topics that clients ask metadata about (Kafka's auto.create.topics.enable)")
	partitions := fs.Int("partitions", 1, "`N` partitions of auto-created topics")
	logLevel := fs.String("log-level", "info", "`LEVEL`: debug, info, warn or error")
	maxConns := fs.Int("max-connections", 0, "serve at most `N` connections at once, accepting more as they close (Kafka's max.connections; 0: half the open-file limit, -1: no cap)")
	maxConnsPerIP := fs.Int("max-connections-per-ip", 0, "close a client address's connections beyond `N` (Kafka's max.connections.per.ip; 0: no cap)")
	idleMs := fs.Int64("connections-max-idle-ms", 600000, "close a connection idle for `MS` milliseconds (Kafka's connections.max.idle.ms; -1: never)")
	requestMaxBytes := fs.Int("socket-request-max-bytes", 100<<20, "refuse request frames over `N` bytes (Kafka's socket.request.max.bytes)")
	requestTimeoutMs := fs.Int64("request-timeout-ms", 30000, "give a request `MS` milliseconds to arrive once begun, and park a fetch at most that long (-1: no bound)")
	maxProducers := fs.Int("max-producers-per-partition", 100000, "refuse new idempotent producers in a partition holding state for `N` (THROTTLING_QUOTA_EXCEEDED until some expire)")
	producerExpiryMs := fs.Int64("producer-id-expiration-ms", 86400000, "drop a producer's state after `MS` milliseconds without a write (Kafka's producer.id.expiration.ms)")
	groupMinSessionMs := fs.Int64("group-min-session-timeout-ms", 6000, "refuse consumer-group session timeouts under `MS` milliseconds (Kafka's group.min.session.timeout.ms)")
	groupMaxSessionMs := fs.Int64("group-max-session-timeout-ms", 1800000, "refuse consumer-group session timeouts over `MS` milliseconds (Kafka's group.max.session.timeout.ms); a JoinGroup also parks at most this long for a rebalance")
	showUsage := func(w io.Writer) {
		fmt.Fprint(w, serveSynopsis, serveAbout, "\nFlags:\n")
		printFlags(w, fs)
	}
	rest, err := parseArgs(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		showUsage(stdout)
		return exitOK
	}
	var level slog.Level
	if err == nil && len(rest) > 0 {
		err = fmt.Errorf("unexpected argument %q", rest[0])
	}
	if err == nil && *dir == "" {
		err = errors.New("--dir is required")
	}
	var sync partition.SyncPolicy
	if err == nil {
		sync, err = partition.ParseSyncPolicy(*fsync)
	}
	if err == nil {
		level, err = parseLogLevel(*logLevel)
	}
	// Checked here, before anything is opened: a mistake is a usage error
	// and leaves no data dir behind.
	if err == nil && *pprofOn && *metricsAddr == "" {
		err = errors.New("--pprof needs --metrics: the profiles are served on its address")
	}
	if err == nil && *partitions < 1 {
		err = fmt.Errorf("--partitions %d: want at least 1", *partitions)
	}
	if err == nil {
		err = checkServeLimits(*maxConns, *maxConnsPerIP, *idleMs, *requestMaxBytes, *requestTimeoutMs, *maxProducers, *producerExpiryMs)
	}
	if err == nil {
		err = checkGroupTimeouts(*groupMinSessionMs, *groupMaxSessionMs)
	}
	if err == nil && *advertise != "" {
		if _, port, perr := net.SplitHostPort(*advertise); perr != nil {
			err = fmt.Errorf("--advertise %q: want HOST:PORT: %w", *advertise, perr)
		} else if p, perr := strconv.ParseUint(port, 10, 16); perr != nil || p == 0 {
			err = fmt.Errorf("--advertise %q: port %q is not 1-65535", *advertise, port)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "idemlog serve: %v\n\n", err)
		showUsage(stderr)
		return exitUsage
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if os.Getenv("GOGC") == "" {
		// The server's heap is small by design (records live in mapped
		// segments, not on the heap), so the default GOGC=100 would
		// collect after every few fetch responses; 400 trades a few MiB
		// of heap for most of those cycles. GOGC in the environment wins.
		debug.SetGCPercent(400)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Once the first signal started the shutdown, a second one has its
	// default effect: a shutdown stuck on a client that does not read
	// (up to closeWriteGrace) can be cut short.
	go func() {
		<-ctx.Done()
		stop()
	}()
	if err := serve(ctx, serveConfig{listen: *listen, dir: *dir, sync: sync, advertise: *advertise,
		metrics: *metricsAddr, pprof: *pprofOn, autoCreate: *autoCreate, partitions: *partitions,
		maxConns: *maxConns, maxConnsPerIP: *maxConnsPerIP, idle: msDuration(*idleMs),
		requestMaxBytes: *requestMaxBytes, requestTimeout: msDuration(*requestTimeoutMs),
		maxProducers: *maxProducers, producerExpiry: msDuration(*producerExpiryMs),
		groupMinSession: msDuration(*groupMinSessionMs), groupMaxSession: msDuration(*groupMaxSessionMs)}, stdout, log); err != nil {
		log.Error("serve failed", "err", err)
		return exitFail
	}
	return exitOK
}

type serveConfig struct {
	listen, dir, advertise, metrics string
	sync                            partition.SyncPolicy
	autoCreate                      bool
	// pprof serves net/http/pprof beside /metrics: where a stuck server's
	// goroutines park, read from outside without stopping it.
	pprof      bool
	partitions int
	// Limits; zero values take the kafka and engine defaults.
	maxConns, maxConnsPerIP, requestMaxBytes, maxProducers int
	idle, requestTimeout, producerExpiry                   time.Duration
	// groupMinSession and groupMaxSession bound consumer-group session
	// timeouts; the max also caps rebalance timeouts, so that a JoinGroup
	// parks (holding its connection) at most that long.
	groupMinSession, groupMaxSession time.Duration
}

// checkGroupTimeouts checks the group timeout flags before anything is
// opened.
func checkGroupTimeouts(minMs, maxMs int64) error {
	switch {
	case minMs < 1:
		return fmt.Errorf("--group-min-session-timeout-ms %d: want at least 1", minMs)
	case maxMs < minMs:
		return fmt.Errorf("--group-max-session-timeout-ms %d: want at least --group-min-session-timeout-ms (%d)", maxMs, minMs)
	}
	return nil
}

// checkServeLimits checks the limit flags before anything is opened.
func checkServeLimits(maxConns, maxConnsPerIP int, idleMs int64, requestMaxBytes int, requestTimeoutMs int64, maxProducers int, producerExpiryMs int64) error {
	switch {
	case maxConns < -1:
		return fmt.Errorf("--max-connections %d: want -1 (no cap), 0 (default) or more", maxConns)
	case maxConnsPerIP < 0:
		return fmt.Errorf("--max-connections-per-ip %d: want 0 (no cap) or more", maxConnsPerIP)
	case idleMs == 0 || idleMs < -1:
		return fmt.Errorf("--connections-max-idle-ms %d: want -1 (never) or at least 1", idleMs)
	case requestMaxBytes < 64 || int64(requestMaxBytes) > math.MaxInt32:
		return fmt.Errorf("--socket-request-max-bytes %d: want 64 to %d", requestMaxBytes, math.MaxInt32)
	case requestTimeoutMs == 0 || requestTimeoutMs < -1:
		return fmt.Errorf("--request-timeout-ms %d: want -1 (no bound) or at least 1", requestTimeoutMs)
	case maxProducers < 1:
		return fmt.Errorf("--max-producers-per-partition %d: want at least 1", maxProducers)
	case producerExpiryMs < 1:
		return fmt.Errorf("--producer-id-expiration-ms %d: want at least 1", producerExpiryMs)
	}
	return nil
}

// msDuration is a milliseconds flag as a duration; -1 stays negative
// ("never", "no bound").
func msDuration(ms int64) time.Duration {
	if ms < 0 {
		return -1
	}
	return time.Duration(ms) * time.Millisecond
}

// serve runs until ctx is done (a signal, for the command) or the
// listener fails.
func serve(ctx context.Context, c serveConfig, stdout io.Writer, log *slog.Logger) error {
	// Every listener first: a port in use fails before the data dir is
	// opened (or created, or recovered), and "listening on" is printed
	// only once nothing can fail any more.
	ln, err := net.Listen("tcp", c.listen)
	if err != nil {
		return fmt.Errorf("cannot listen: %w", err)
	}
	var mln net.Listener
	if c.metrics != "" {
		if mln, err = net.Listen("tcp", c.metrics); err != nil {
			ln.Close()
			return fmt.Errorf("cannot listen for metrics: %w", err)
		}
	}
	closeListeners := func() {
		ln.Close()
		if mln != nil {
			mln.Close()
		}
	}
	// Under fsync always, consumers see only what is on disk (the high
	// watermark moves after the sync), as a Kafka consumer sees only what
	// is replicated: nothing a consumer read can vanish in a crash.
	// Recovery at open (truncations, rebuilt indexes, damaged files) is
	// logged through the listener's logger.
	e, err := engine.Open(c.dir, engine.Options{Partition: partition.Options{Sync: c.sync,
		DurableVisibility: c.sync.Kind == partition.SyncAlways},
		MaxProducersPerPartition: c.maxProducers, ProducerIDExpiration: c.producerExpiry,
		Logger: log.With("component", "engine")})
	if err != nil {
		closeListeners()
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	srv, err := kafka.New(e, kafka.Options{Advertise: c.advertise, AutoCreateTopics: c.autoCreate,
		DefaultPartitions: c.partitions, Logger: log, Registerer: reg,
		MaxConnections: c.maxConns, MaxConnectionsPerIP: c.maxConnsPerIP, IdleTimeout: c.idle,
		MaxFrameSize: c.requestMaxBytes, RequestTimeout: c.requestTimeout,
		Group: group.Options{MinSessionTimeout: c.groupMinSession, MaxSessionTimeout: c.groupMaxSession,
			MaxRebalanceTimeout: c.groupMaxSession}})
	if err != nil {
		closeListeners()
		e.Close()
		return err
	}
	fmt.Fprintf(stdout, "listening on %s\n", ln.Addr())
	if f, ok := stdout.(*os.File); ok {
		f.Sync()
	}
	var hs *http.Server
	if mln != nil {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		if c.pprof {
			mux.HandleFunc("/debug/pprof/", pprof.Index)
			mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
			mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
			mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
			mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		}
		hs = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go hs.Serve(mln)
		log.Info("serving metrics", "addr", mln.Addr().String())
		fmt.Fprintf(stdout, "metrics on %s\n", mln.Addr())
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case err = <-served:
	}
	srv.Close()
	if hs != nil {
		hs.Close()
	}
	if cerr := e.Close(); cerr != nil {
		return errors.Join(err, fmt.Errorf("cannot close engine: %w", cerr))
	}
	log.Info("engine closed cleanly")
	return err
}
