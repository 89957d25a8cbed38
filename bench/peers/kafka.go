package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"time"
)

// KafkaConfig is the Kafka-protocol comparison's workload.
type KafkaConfig struct {
	Records    int      `json:"records"`
	RecordSize int      `json:"record_size"`
	Partitions []int    `json:"partitions"`
	Rounds     int      `json:"rounds"`
	Targets    []string `json:"targets"`
	// TxnEvery > 0 adds a transactional case per partition count,
	// committing every TxnEvery records.
	TxnEvery    int    `json:"txn_every"`
	Compression string `json:"compression"`
	// Dir holds idemlog's data directories (one per run, removed after).
	Dir string `json:"dir"`
	// CPUProfile, if set, is the prefix of one CPU profile per target,
	// case and phase of the first round: PREFIX-TARGET-MODE-pN-PHASE.pprof.
	CPUProfile string `json:"cpu_profile,omitempty"`
	// BrokerProcess runs each broker in a child process (see
	// kafka_process.go); the profiles then show the client alone.
	BrokerProcess bool `json:"broker_process"`
}

// KafkaRun is one target's measurement of one case in one round: a fresh
// broker, a produce pass, then a read_committed consume of what it wrote.
type KafkaRun struct {
	Round      int    `json:"round"`
	Target     string `json:"target"`
	Mode       string `json:"mode"`
	Partitions int    `json:"partitions"`
	Produce    Phase  `json:"produce"`
	Consume    Phase  `json:"consume"`
}

// KafkaReport is the JSON report of `peers kafka`.
type KafkaReport struct {
	Host    Host        `json:"host"`
	Config  KafkaConfig `json:"config"`
	Runs    []KafkaRun  `json:"runs"`
	Summary []Summary   `json:"summary"`
}

const kafkaTopic = "peers"

type kafkaCase struct {
	mode       string // idempotent or transactional
	partitions int
}

// runKafka measures every case on every target, round after round; within
// a case the targets alternate, their order rotated each round so that
// none always runs first (on a warmer or cooler machine).
func runKafka(ctx context.Context, c KafkaConfig, progress io.Writer) (*KafkaReport, error) {
	c.Targets = trimAll(c.Targets) // the summary matches runs by name
	targets, err := kafkaTargets(c.Targets, c.Dir)
	if err != nil {
		return nil, err
	}
	var cases []kafkaCase
	for _, p := range c.Partitions {
		cases = append(cases, kafkaCase{"idempotent", p})
	}
	if c.TxnEvery > 0 {
		for _, p := range c.Partitions {
			cases = append(cases, kafkaCase{"transactional", p})
		}
	}
	rep := &KafkaReport{Host: host(), Config: c}
	for round := range c.Rounds {
		for _, kc := range cases {
			for i := range targets {
				t := targets[(i+round)%len(targets)]
				run, err := kafkaOnce(ctx, c, t, kc, round)
				if err != nil {
					return rep, fmt.Errorf("%s %s p=%d round %d: %w", t.name, kc.mode, kc.partitions, round, err)
				}
				rep.Runs = append(rep.Runs, run)
				pr, co := &run.Produce, &run.Consume
				fmt.Fprintf(progress, "round %d %-14s %-13s p=%d  produce %8.0f rec/s %4d req %3d gc  consume %8.0f rec/s %4d req %3d gc %5.0f B/rec\n",
					round, t.name, kc.mode, kc.partitions, pr.RecordsPerSec, pr.Requests, pr.GCCycles,
					co.RecordsPerSec, co.Requests, co.GCCycles, co.AllocBytesPerRecord)
			}
		}
	}
	rep.Summary = summarizeKafka(rep.Runs, c.Targets)
	return rep, nil
}

func kafkaOnce(ctx context.Context, c KafkaConfig, t target, kc kafkaCase, round int) (KafkaRun, error) {
	run := KafkaRun{Round: round, Target: t.name, Mode: kc.mode, Partitions: kc.partitions}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var b broker
	var err error
	if c.BrokerProcess {
		b, err = startProcBroker(t, kc.partitions, c.Dir)
	} else {
		b, err = t.start(kafkaTopic, kc.partitions)
	}
	if err != nil {
		return run, err
	}
	txnEvery := 0
	if kc.mode == "transactional" {
		txnEvery = c.TxnEvery
	}
	prof := func(phase string) (func(), error) {
		if c.CPUProfile == "" || round != 0 {
			return func() {}, nil
		}
		return startProfile(fmt.Sprintf("%s-%s-%s-p%d-%s.pprof", c.CPUProfile, t.name, kc.mode, kc.partitions, phase))
	}
	settle()
	phase := func(name string, ph *Phase, f func() (Phase, error)) error {
		settle()
		stop, err := prof(name)
		if err != nil {
			return err
		}
		defer stop()
		pb, _ := b.(*procBroker)
		var cpu0 time.Duration
		if pb != nil {
			if cpu0, err = pb.cpu(); err != nil {
				return err
			}
		}
		if *ph, err = f(); err != nil {
			return err
		}
		if pb != nil {
			cpu1, err := pb.cpu()
			if err != nil {
				return err
			}
			ph.BrokerCPUUsPerRecord = float64(cpu1-cpu0) / float64(time.Microsecond) / float64(ph.Records)
		}
		return nil
	}
	err = phase("produce", &run.Produce, func() (Phase, error) {
		return produce(ctx, b.addr(), kafkaTopic, &c, txnEvery)
	})
	if err == nil {
		err = phase("consume", &run.Consume, func() (Phase, error) {
			return consume(ctx, b.addr(), kafkaTopic, kc.partitions, run.Produce.Records, &c)
		})
	}
	if cerr := b.close(); err == nil && cerr != nil {
		err = fmt.Errorf("cannot close %s: %w", t.name, cerr)
	}
	return run, err
}

// settle collects the heap and returns its free memory to the OS before
// a phase starts: otherwise the previous phase's garbage (kfake keeps its
// log in the heap, the producer buffers records) is collected, and its
// pages given back by the runtime's scavenger, on the next phase's clock.
func settle() { debug.FreeOSMemory() }

// startProfile starts a CPU profile into path and returns what stops it.
func startProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cannot create profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cannot start profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// summarizeKafka groups runs into one Summary per phase, case and target,
// with ratios to kfake round by round (each pair measured minutes apart at
// most, on the same machine state).
func summarizeKafka(runs []KafkaRun, targets []string) []Summary {
	var out []Summary
	for _, phase := range []string{"produce", "consume"} {
		for _, mode := range []string{"idempotent", "transactional"} {
			var parts []int
			for _, r := range runs {
				if r.Mode == mode && !slices.Contains(parts, r.Partitions) {
					parts = append(parts, r.Partitions)
				}
			}
			for _, p := range parts {
				byTarget := map[string][]Phase{}
				for _, r := range runs {
					if r.Mode == mode && r.Partitions == p {
						ph := r.Produce
						if phase == "consume" {
							ph = r.Consume
						}
						byTarget[r.Target] = append(byTarget[r.Target], ph)
					}
				}
				label := fmt.Sprintf("%s %s p=%d", phase, mode, p)
				if phase == "consume" {
					label = fmt.Sprintf("consume read_committed (%s) p=%d", mode, p)
				}
				out = append(out, summarize(label, targets, byTarget, "kfake")...)
			}
		}
	}
	return out
}
