package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/idemlog/idemlog/mirror"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

var mirrorUsage = commandUsage{
	name:     "mirror",
	synopsis: "Usage: idemlog mirror --from SOURCE --to DESTINATION [flags]\n",
	about: `
Copy topics exactly once from SOURCE to DESTINATION. Each is an idemlog
data dir, opened in this process (no server needed; it must not be open
elsewhere), or a Kafka-protocol cluster given as HOST:PORT[,HOST:PORT...]
(Kafka, Redpanda, 'idemlog serve'). A value that parses as a list of
HOST:PORT is a cluster; write ./NAME for a directory named like one.

Records are consumed read_committed (aborted transactions are not copied)
and produced in destination transactions that also store the source
positions in the destination's positions topic, so a mirror stopped at any
moment, SIGKILL included, resumes where its last committed transaction
ended: nothing lost, nothing twice. Keys, values, headers, timestamps and
partition numbers are kept; missing destination topics are created with
the source's partition count and config overrides.
`,
	details: `
Progress (records/s, lag per partition) is shown on a terminal (stderr);
--json prints one JSON object per interval on stdout instead, the last
with "done": true. SIGINT or SIGTERM aborts the transaction in hand and
exits 0; the next run resumes from the stored positions.

Exit status: 0 when stopped (or caught up with --stop-at-end), 1 when the
destination refuses the copy (a topic holding records with fewer
partitions than its source, a topic it will not create, a record too
large), no source topic matches or the source dir does not exist, 2 for a
usage error.

SASL passwords come from the environment, IDEMLOG_FROM_SASL_PASSWORD and
IDEMLOG_TO_SASL_PASSWORD, not from the command line (ps shows it).
`,
}

// endpointFlags are the connection flags of one side.
type endpointFlags struct {
	addr                string
	tls                 bool
	tlsCA               string
	saslMech, saslUser  string
	saslPasswordEnvName string
}

func (f *endpointFlags) register(fs *flag.FlagSet, side, what string) {
	fs.StringVar(&f.addr, side, "", what+" `ENDPOINT`: a data dir or HOST:PORT[,HOST:PORT...] (required)")
	fs.BoolVar(&f.tls, side+"-tls", false, "connect to the "+what+" cluster with TLS")
	fs.StringVar(&f.tlsCA, side+"-tls-ca", "", "PEM `FILE` of the CAs that sign the "+what+" cluster's certificates (implies --"+side+"-tls; default: the system's)")
	fs.StringVar(&f.saslMech, side+"-sasl-mechanism", "", "SASL `MECHANISM` for the "+what+" cluster: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
	fs.StringVar(&f.saslUser, side+"-sasl-user", "", "SASL `USER` for the "+what+" cluster")
	f.saslPasswordEnvName = "IDEMLOG_" + strings.ToUpper(side) + "_SASL_PASSWORD"
}

// endpoint turns the flags into a mirror.Endpoint.
func (f *endpointFlags) endpoint(side string) (mirror.Endpoint, error) {
	if f.addr == "" {
		return mirror.Endpoint{}, fmt.Errorf("--%s is required", side)
	}
	brokers, ok := brokerList(f.addr)
	secure := f.tls || f.tlsCA != "" || f.saslMech != "" || f.saslUser != ""
	if !ok {
		if secure {
			return mirror.Endpoint{}, fmt.Errorf("--%s %q is a data dir: TLS and SASL flags apply to clusters only", side, f.addr)
		}
		return mirror.Endpoint{Dir: f.addr}, nil
	}
	e := mirror.Endpoint{Brokers: brokers}
	if f.tls || f.tlsCA != "" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if f.tlsCA != "" {
			pem, err := os.ReadFile(f.tlsCA)
			if err != nil {
				return e, fmt.Errorf("cannot read --%s-tls-ca: %w", side, err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return e, fmt.Errorf("cannot read --%s-tls-ca %s: no PEM certificate in it", side, f.tlsCA)
			}
		}
		e.Opts = append(e.Opts, kgo.DialTLSConfig(cfg))
	}
	if f.saslMech != "" || f.saslUser != "" {
		pass := os.Getenv(f.saslPasswordEnvName)
		switch strings.ToUpper(f.saslMech) {
		case "PLAIN":
			e.Opts = append(e.Opts, kgo.SASL(plain.Auth{User: f.saslUser, Pass: pass}.AsMechanism()))
		case "SCRAM-SHA-256":
			e.Opts = append(e.Opts, kgo.SASL(scram.Auth{User: f.saslUser, Pass: pass}.AsSha256Mechanism()))
		case "SCRAM-SHA-512":
			e.Opts = append(e.Opts, kgo.SASL(scram.Auth{User: f.saslUser, Pass: pass}.AsSha512Mechanism()))
		default:
			return e, fmt.Errorf("--%s-sasl-mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", side, f.saslMech)
		}
	}
	return e, nil
}

// brokerList splits s into HOST:PORT addresses; false if any part is not
// one (then s is a directory).
func brokerList(s string) ([]string, bool) {
	parts := strings.Split(s, ",")
	for _, p := range parts {
		host, port, err := net.SplitHostPort(p)
		if err != nil || host == "" || strings.ContainsAny(host, `/\`) {
			return nil, false
		}
		if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
			return nil, false
		}
	}
	return parts, true
}

func runMirror(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("mirror")
	var from, to endpointFlags
	from.register(fs, "from", "source")
	to.register(fs, "to", "destination")
	topics := fs.String("topics", ".*", "copy the source topics whose names match `REGEX` (topics named __* never)")
	name := fs.String("name", "idemlog", "`NAME` of the mirror: its positions and transactional id; mirrors of different names may share a destination")
	positions := fs.String("positions-topic", mirror.DefaultPositionsTopic, "destination `TOPIC` of the source positions")
	commitInterval := fs.Duration("commit-interval", 100*time.Millisecond, "commit a destination transaction every `DURATION`")
	stopAtEnd := fs.Bool("stop-at-end", false, "exit once everything committed in the source when the mirror started is copied")
	jsonOut := fs.Bool("json", false, "print progress as one JSON object per interval on stdout")
	interval := fs.Duration("progress-interval", time.Second, "show progress every `DURATION`")
	scanInterval := fs.Duration("topic-scan-interval", 30*time.Second, "list the source topics again every `DURATION`, to copy new ones and new partitions")
	logLevel := fs.String("log-level", "warn", "`LEVEL`: debug, info, warn or error")
	rest, err := parseArgs(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		mirrorUsage.print(stdout, fs, true)
		return exitOK
	}
	o := mirror.Options{Name: *name, PositionsTopic: *positions, CommitInterval: *commitInterval,
		StopAtEnd: *stopAtEnd, ProgressInterval: *interval, TopicScanInterval: *scanInterval}
	var level slog.Level
	if err == nil && len(rest) > 0 {
		err = fmt.Errorf("unexpected argument %q", rest[0])
	}
	if err == nil {
		o.From, err = from.endpoint("from")
	}
	if err == nil {
		o.To, err = to.endpoint("to")
	}
	if err == nil && *topics != "" {
		if o.Topics, err = regexp.Compile(*topics); err != nil {
			err = fmt.Errorf("--topics: %w", err)
		}
	}
	if err == nil {
		err = level.UnmarshalText([]byte(*logLevel))
	}
	if err == nil && (*commitInterval <= 0 || *interval <= 0 || *scanInterval <= 0) {
		err = errors.New("--commit-interval, --progress-interval and --topic-scan-interval must be positive")
	}
	if err == nil && o.From.Dir != "" && o.From.Dir == o.To.Dir {
		err = errors.New("--from and --to are the same data dir")
	}
	if err != nil {
		fmt.Fprintf(stderr, "idemlog mirror: %v\n\n", err)
		mirrorUsage.print(stderr, fs, false)
		return exitUsage
	}
	o.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	switch {
	case *jsonOut:
		enc := json.NewEncoder(stdout)
		o.Progress = func(p mirror.Progress) { enc.Encode(progressJSON(p)) }
	case isTerminal(stderr):
		o.Progress = func(p mirror.Progress) { printProgress(stderr, p) }
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := mirror.Run(ctx, o); err != nil {
		fmt.Fprintf(stderr, "idemlog mirror: %v\n", err)
		return exitFail
	}
	return exitOK
}

type progressLine struct {
	Time             time.Time                  `json:"time"`
	Records          int64                      `json:"records"`
	RecordsPerSecond float64                    `json:"records_per_sec"`
	Lag              int64                      `json:"lag"`
	Partitions       []mirror.PartitionProgress `json:"partitions"`
	Done             bool                       `json:"done,omitempty"`
}

func progressJSON(p mirror.Progress) progressLine {
	l := progressLine{Time: time.Now().UTC(), Records: p.Records, RecordsPerSecond: p.RecordsPerSecond,
		Partitions: p.Partitions, Done: p.Done}
	for _, pp := range p.Partitions {
		l.Lag += pp.Lag
	}
	if l.Partitions == nil {
		l.Partitions = []mirror.PartitionProgress{}
	}
	return l
}

// printProgress redraws one status line: totals, then the partitions with
// the most lag (all of them when few).
func printProgress(w io.Writer, p mirror.Progress) {
	l := progressJSON(p)
	parts := append([]mirror.PartitionProgress(nil), p.Partitions...)
	sort.SliceStable(parts, func(i, j int) bool { return parts[i].Lag > parts[j].Lag })
	var b strings.Builder
	fmt.Fprintf(&b, "\r\033[K%d records copied, %.0f records/s, lag %d", l.Records, l.RecordsPerSecond, l.Lag)
	for i, pp := range parts {
		if i == 6 {
			fmt.Fprintf(&b, " ...")
			break
		}
		fmt.Fprintf(&b, " %s/%d:%d", pp.Topic, pp.Partition, pp.Lag)
	}
	if p.Done {
		b.WriteString("\n")
	}
	io.WriteString(w, b.String())
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
