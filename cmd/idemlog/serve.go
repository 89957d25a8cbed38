package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"syscall"
	"time"

	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/kafka"
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
	autoCreate := fs.Bool("auto-create", true, "create topics that clients ask metadata about (Kafka's auto.create.topics.enable)")
	partitions := fs.Int("partitions", 1, "`N` partitions of auto-created topics")
	logLevel := fs.String("log-level", "info", "`LEVEL`: debug, info, warn or error")
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
	// and leaves no data dir behind. (From review.)
	if err == nil && *partitions < 1 {
		err = fmt.Errorf("--partitions %d: want at least 1", *partitions)
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
	// (up to closeWriteGrace) can be cut short. (From review.)
	go func() {
		<-ctx.Done()
		stop()
	}()
	if err := serve(ctx, serveConfig{listen: *listen, dir: *dir, sync: sync, advertise: *advertise,
		metrics: *metricsAddr, autoCreate: *autoCreate, partitions: *partitions}, stdout, log); err != nil {
		log.Error("serve failed", "err", err)
		return exitFail
	}
	return exitOK
}

type serveConfig struct {
	listen, dir, advertise, metrics string
	sync                            partition.SyncPolicy
	autoCreate                      bool
	partitions                      int
}

// serve runs until ctx is done (a signal, for the command) or the
// listener fails.
func serve(ctx context.Context, c serveConfig, stdout io.Writer, log *slog.Logger) error {
	// Every listener first: a port in use fails before the data dir is
	// opened (or created, or recovered), and "listening on" is printed
	// only once nothing can fail any more. (From review.)
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
	e, err := engine.Open(c.dir, engine.Options{Partition: partition.Options{Sync: c.sync,
		DurableVisibility: c.sync.Kind == partition.SyncAlways}})
	if err != nil {
		closeListeners()
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	srv, err := kafka.New(e, kafka.Options{Advertise: c.advertise, AutoCreateTopics: c.autoCreate,
		DefaultPartitions: c.partitions, Logger: log, Registerer: reg})
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
