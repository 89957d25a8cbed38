package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
)

func main() {
	maybeBroker()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `Usage: peers kafka [flags]     (Kafka listener vs franz-go kfake, through kgo)
       peers storage [flags]   (engine vs NATS JetStream, kfake, pebble, raw write)
Run 'peers COMMAND -h' for the flags.
`

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var err error
	switch args[0] {
	case "kafka":
		err = kafkaCmd(ctx, args[1:], stdout, stderr)
	case "storage":
		err = storageCmd(ctx, args[1:], stdout, stderr)
	default:
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "peers: %v\n", err)
		return 2
	case err != nil:
		fmt.Fprintf(stderr, "peers: %v\n", err)
		return 1
	}
	return 0
}

// errUsage marks errors in the command line.
var errUsage = errors.New("usage")

func kafkaCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("peers kafka", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := KafkaConfig{}
	fs.IntVar(&c.Records, "records", 200_000, "records per produce pass")
	fs.IntVar(&c.RecordSize, "size", 1024, "record value `bytes` (random, incompressible)")
	parts := fs.String("partitions", "1,4", "partition counts, one case each")
	fs.IntVar(&c.Rounds, "rounds", 3, "rounds; targets alternate within each")
	targets := fs.String("targets", "kfake,idemlog,idemlog-pwrite,idemlog-always", "targets: kfake, idemlog (fsync never), idemlog-always, idemlog-pwrite (never, pwritev only)")
	fs.IntVar(&c.TxnEvery, "txn-every", 10_000, "add transactional cases committing every `N` records (0: none)")
	fs.StringVar(&c.Compression, "compression", "default", "producer codec: default (kgo's: snappy), none, snappy, lz4, zstd")
	fs.StringVar(&c.Dir, "dir", os.TempDir(), "`DIR` for idemlog's data directories")
	fs.StringVar(&c.CPUProfile, "cpuprofile", "", "write a CPU profile per target, case and phase of round 0 to `PREFIX`-TARGET-MODE-pN-PHASE.pprof")
	fs.BoolVar(&c.BrokerProcess, "broker-process", false, "run each broker in a child process (own heap and GC; its CPU time measured apart)")
	jsonPath := fs.String("json", "", "also write every figure as JSON to `FILE`")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var err error
	if c.Partitions, err = intList(*parts); err != nil {
		return err
	}
	c.Targets = strings.Split(*targets, ",")
	if c.Records <= 0 || c.RecordSize <= 0 || c.Rounds <= 0 {
		return fmt.Errorf("-records, -size and -rounds must be positive: %w", errUsage)
	}
	rep, err := runKafka(ctx, c, stderr)
	if err != nil {
		return err
	}
	if err := printSummaries(stdout, rep.Summary); err != nil {
		return err
	}
	return writeJSON(*jsonPath, rep)
}

func intList(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("cannot parse %q as a list of positive integers: %w", s, errUsage)
		}
		out = append(out, n)
	}
	return out, nil
}

// writeJSON writes v, indented, to path; nothing if path is empty.
func writeJSON(path string, v any) error {
	if path == "" {
		return nil
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("cannot encode report: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("cannot write report: %w", err)
	}
	return nil
}
