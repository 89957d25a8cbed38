package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Phase is what one produce or consume pass measured.
type Phase struct {
	Records       int64   `json:"records"`
	PayloadBytes  int64   `json:"payload_bytes"`
	Seconds       float64 `json:"seconds"`
	RecordsPerSec float64 `json:"records_per_sec"`
	MBPerSec      float64 `json:"payload_mb_per_sec"`
	// DiskMBPerSec is what the device holding the run's directory wrote
	// over the phase (diskWriteBytes), per second: framing, indexes, zero
	// fills, pages written again by the next sync and the filesystem's
	// journal included, which payload_mb_per_sec leaves out; the whole
	// device's, so the machine must be quiet. Storage runs only; zero
	// where the device keeps no count.
	DiskMBPerSec float64 `json:"disk_mb_per_sec,omitempty"`
	// CPUUsPerRecord is this process's CPU time over the phase, per
	// record: client and broker together, or the client alone when the
	// broker runs in a child process, whose own figure is then
	// BrokerCPUUsPerRecord.
	CPUUsPerRecord       float64 `json:"cpu_us_per_record"`
	BrokerCPUUsPerRecord float64 `json:"broker_cpu_us_per_record,omitempty"`
	// GCCycles and AllocBytesPerRecord are the process's over the phase:
	// a broker whose live heap is small (idemlog keeps records in mapped
	// files, kfake in the heap) collects more often for the same garbage.
	GCCycles            uint32  `json:"gc_cycles"`
	AllocBytesPerRecord float64 `json:"alloc_bytes_per_record"`
	// RecordLatencyUs (produce): per record, from the Produce call to its
	// promise. Produce blocks while the client buffers its maximum (10k
	// records by default), so under load this is mostly queueing in the
	// client: it moves with throughput.
	RecordLatencyUs Latency `json:"record_latency_us,omitzero"`
	// RequestLatencyUs: per Produce (Fetch) request, from its write to
	// the end of its response (kgo's BrokerE2E): the broker's own time
	// plus the loopback, which is what differs between brokers. A Fetch
	// the broker parks waiting for data counts its wait.
	RequestLatencyUs Latency `json:"request_latency_us,omitzero"`
	// Requests is how many Produce (Fetch) requests the phase took, and
	// ResponseBytes their responses' bytes: batching as the broker shaped
	// it.
	Requests      int64 `json:"requests,omitempty"`
	ResponseBytes int64 `json:"response_bytes,omitempty"`
	// BatchLatencyUs (storage): per batch, from the call that writes it
	// to its return (its sync included when the workload syncs).
	BatchLatencyUs Latency `json:"batch_latency_us,omitzero"`
}

// meter reads the clocks and the heap counters at the start of a phase.
type meter struct {
	begin time.Time
	cpu   time.Duration
	ms    runtime.MemStats
	dir   string // the run's directory, "" for none
	disk  int64  // diskWriteBytes at the start; -1 without a count
}

// startMeter starts a phase; dir, if not "", is the run's directory, whose
// device's writes the phase counts.
func startMeter(dir string) *meter {
	m := &meter{dir: dir}
	runtime.ReadMemStats(&m.ms) // stops the world briefly: before the clock
	m.disk = -1
	if n, ok := diskWriteBytes(dir); ok {
		m.disk = n
	}
	m.begin, m.cpu = time.Now(), cpuTime()
	return m
}

// finish fills p's rates and process figures from the meter's start to now.
func (p *Phase) finish(m *meter) {
	elapsed, cpu := time.Since(m.begin), cpuTime()-m.cpu
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	p.GCCycles = ms.NumGC - m.ms.NumGC
	p.Seconds = elapsed.Seconds()
	if p.Records > 0 {
		p.CPUUsPerRecord = float64(cpu) / float64(time.Microsecond) / float64(p.Records)
		p.AllocBytesPerRecord = float64(ms.TotalAlloc-m.ms.TotalAlloc) / float64(p.Records)
	}
	if p.Seconds > 0 {
		p.RecordsPerSec = float64(p.Records) / p.Seconds
		p.MBPerSec = float64(p.PayloadBytes) / p.Seconds / 1e6
		if n, ok := diskWriteBytes(m.dir); ok && m.disk >= 0 {
			p.DiskMBPerSec = float64(n-m.disk) / p.Seconds / 1e6
		}
	}
}

// reqHook keeps the end-to-end time of every request of one key.
type reqHook struct {
	key   int16 // 0: Produce, 1: Fetch
	mu    sync.Mutex
	ns    []int64
	bytes int64
}

func (h *reqHook) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e kgo.BrokerE2E) {
	if key != h.key || e.Err() != nil {
		return
	}
	h.mu.Lock()
	h.ns = append(h.ns, int64(e.DurationE2E()))
	h.bytes += int64(e.BytesRead)
	h.mu.Unlock()
}

// fill copies the hook's figures into p.
func (h *reqHook) fill(p *Phase) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p.Requests, p.ResponseBytes = int64(len(h.ns)), h.bytes
	p.RequestLatencyUs = latencyOf(h.ns)
}

// clientOpts are the options every client gets: kgo's defaults otherwise,
// so that what is measured is what an application gets without tuning.
func clientOpts(addr string, c *KafkaConfig) ([]kgo.Opt, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.ProducerLinger(0)}
	switch c.Compression {
	case "default":
	case "none":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.NoCompression()))
	case "snappy":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.SnappyCompression()))
	case "lz4":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	case "zstd":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	default:
		return nil, fmt.Errorf("cannot use compression %q: want default, none, snappy, lz4 or zstd", c.Compression)
	}
	return opts, nil
}

// produce writes c.Records values of c.RecordSize bytes to topic with one
// idempotent producer (acks=all, kgo's default), transactional when
// txnEvery > 0, committing every txnEvery records.
func produce(ctx context.Context, addr, topic string, c *KafkaConfig, txnEvery int) (Phase, error) {
	hook := &reqHook{key: 0}
	opts, err := clientOpts(addr, c)
	if err != nil {
		return Phase{}, err
	}
	opts = append(opts, kgo.DefaultProduceTopic(topic), kgo.WithHooks(hook))
	if txnEvery > 0 {
		opts = append(opts, kgo.TransactionalID("peers-"+topic))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return Phase{}, fmt.Errorf("cannot create producer: %w", err)
	}
	defer cl.Close()
	pl := newPayload(c.RecordSize, 1)
	lat := make([]int64, c.Records)
	var failed atomic.Pointer[error]
	var ph Phase
	m := startMeter("")
	begin := m.begin
	if txnEvery > 0 {
		if err := cl.BeginTransaction(); err != nil {
			return ph, fmt.Errorf("cannot begin transaction: %w", err)
		}
	}
	for i := range c.Records {
		r := &kgo.Record{Value: pl.next()}
		t := time.Since(begin)
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			lat[i] = int64(time.Since(begin) - t)
			if err != nil {
				failed.CompareAndSwap(nil, &err)
			}
		})
		if txnEvery > 0 && ((i+1)%txnEvery == 0 || i+1 == c.Records) {
			if err := commit(ctx, cl, i+1 < c.Records); err != nil {
				return ph, err
			}
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return ph, fmt.Errorf("cannot flush: %w", err)
	}
	if e := failed.Load(); e != nil {
		return ph, fmt.Errorf("cannot produce: %w", *e)
	}
	ph.Records = int64(c.Records)
	ph.PayloadBytes = int64(c.Records) * int64(c.RecordSize)
	ph.finish(m)
	ph.RecordLatencyUs = latencyOf(lat)
	hook.fill(&ph)
	return ph, nil
}

// commit flushes and commits the open transaction (kgo's EndTransaction
// does not flush) and, if again, begins the next.
func commit(ctx context.Context, cl *kgo.Client, again bool) error {
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("cannot flush transaction: %w", err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return fmt.Errorf("cannot commit transaction: %w", err)
	}
	if again {
		if err := cl.BeginTransaction(); err != nil {
			return fmt.Errorf("cannot begin transaction: %w", err)
		}
	}
	return nil
}

// errExtra: the consumer got more records than were produced.
var errExtra = errors.New("consumed more records than produced")

// consume reads every partition of topic from the start with
// read_committed, from a fresh client, until it has seen want records.
func consume(ctx context.Context, addr, topic string, partitions int, want int64, c *KafkaConfig) (Phase, error) {
	opts, err := clientOpts(addr, c)
	if err != nil {
		return Phase{}, err
	}
	offs := map[int32]kgo.Offset{}
	for p := range partitions {
		offs[int32(p)] = kgo.NewOffset().AtStart()
	}
	hook := &reqHook{key: 1}
	opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.WithHooks(hook))
	var ph Phase
	m := startMeter("")
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return ph, fmt.Errorf("cannot create consumer: %w", err)
	}
	defer cl.Close()
	for ph.Records < want {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return ph, fmt.Errorf("cannot consume: %d of %d records: %w", ph.Records, want, err)
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			ferr = fmt.Errorf("cannot fetch %s/%d: %w", t, p, err)
		})
		if ferr != nil {
			return ph, ferr
		}
		fs.EachRecord(func(r *kgo.Record) {
			ph.Records++
			ph.PayloadBytes += int64(len(r.Value))
		})
	}
	ph.finish(m)
	hook.fill(&ph)
	if ph.Records > want {
		return ph, fmt.Errorf("cannot trust the run: %d records for %d: %w", ph.Records, want, errExtra)
	}
	return ph, nil
}
