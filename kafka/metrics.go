package kafka

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the server's Prometheus collectors. They exist (and are
// updated) whether or not a registry exports them, so the request path has
// no branch on configuration.
type metrics struct {
	requests      *prometheus.CounterVec // by api
	errors        *prometheus.CounterVec // by api and Kafka error code
	requestTime   *prometheus.HistogramVec
	bytesIn       prometheus.Counter
	bytesOut      prometheus.Counter
	bytesFetched  prometheus.Counter
	recordsIn     prometheus.Counter
	badFrames     prometheus.Counter
	panics        prometheus.Counter
	conns         prometheus.Gauge
	refusedConns  prometheus.Counter
	appendLatency prometheus.Histogram
	fetchLatency  prometheus.Histogram
	gauges        []prometheus.Collector

	// byKey caches the per-key children, so a request does not hash label
	// values.
	byKey [128]struct {
		requests prometheus.Counter
		time     prometheus.Observer
	}
}

// latencyBuckets span 50 µs to ~26 s.
var latencyBuckets = prometheus.ExponentialBuckets(50e-6, 2, 20)

func newMetrics(s *Server) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "idemlog_kafka_requests_total",
			Help: "Kafka requests handled, by API."}, []string{"api"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "idemlog_kafka_errors_total",
			Help: "Error codes returned, by API and Kafka error code (per partition where the API answers per partition)."}, []string{"api", "code"}),
		requestTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "idemlog_kafka_request_seconds",
			Help: "Time to handle a request, before any wait for a sync, by API.", Buckets: latencyBuckets}, []string{"api"}),
		bytesIn:      prometheus.NewCounter(prometheus.CounterOpts{Name: "idemlog_kafka_bytes_in_total", Help: "Request bytes read."}),
		bytesOut:     prometheus.NewCounter(prometheus.CounterOpts{Name: "idemlog_kafka_bytes_out_total", Help: "Response bytes written."}),
		bytesFetched: prometheus.NewCounter(prometheus.CounterOpts{Name: "idemlog_kafka_fetched_bytes_total", Help: "Record batch bytes returned by fetches."}),
		recordsIn:    prometheus.NewCounter(prometheus.CounterOpts{Name: "idemlog_kafka_produced_records_total", Help: "Records appended by produce requests (duplicates count once per retry)."}),
		badFrames:    prometheus.NewCounter(prometheus.CounterOpts{Name: "idemlog_kafka_bad_frames_total", Help: "Connections closed for a malformed, oversized or unsupported request."}),
		panics:       prometheus.NewCounter(prometheus.CounterOpts{Name: "idemlog_kafka_handler_panics_total", Help: "Requests whose handler panicked (a bug): the connection was closed."}),
		conns:        prometheus.NewGauge(prometheus.GaugeOpts{Name: "idemlog_kafka_connections", Help: "Open client connections."}),
		refusedConns: prometheus.NewCounter(prometheus.CounterOpts{Name: "idemlog_kafka_refused_connections_total", Help: "Connections closed on accept for max.connections.per.ip."}),
		appendLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "idemlog_append_seconds",
			Help: "Produce request latency, appends and the sync policy's wait.", Buckets: latencyBuckets}),
		fetchLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "idemlog_fetch_seconds",
			Help: "Fetch request latency, including the long-poll wait.", Buckets: latencyBuckets}),
	}
	for _, a := range apis {
		m.byKey[a.key].requests = m.requests.WithLabelValues(a.key.Name())
		m.byKey[a.key].time = m.requestTime.WithLabelValues(a.key.Name())
	}
	e := s.eng
	m.gauges = []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "idemlog_producers", Help: "Producer states held, summed over partitions."},
			func() float64 {
				n := 0
				for _, p := range e.Partitions() {
					n += p.Producers()
				}
				return float64(n)
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "idemlog_open_transactions", Help: "Transactions ongoing or being completed."},
			func() float64 { return float64(s.coord.OpenTransactions()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "idemlog_lso_lag_offsets", Help: "High watermark minus last stable offset, summed over partitions: what read_committed consumers cannot see yet."},
			func() float64 {
				var lag int64
				for _, p := range e.Partitions() {
					lag += p.HighWatermark() - p.LastStableOffset()
				}
				return float64(lag)
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "idemlog_consumer_groups", Help: "Consumer groups known to the coordinator."},
			func() float64 { return float64(s.groups.Groups()) }),
	}
	return m
}

func (m *metrics) register(r prometheus.Registerer) error {
	cs := []prometheus.Collector{m.requests, m.errors, m.requestTime, m.bytesIn, m.bytesOut, m.bytesFetched,
		m.recordsIn, m.badFrames, m.panics, m.conns, m.refusedConns, m.appendLatency, m.fetchLatency}
	for _, c := range append(cs, m.gauges...) {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}

func (m *metrics) observe(key int16, d time.Duration) {
	if key < 0 || int(key) >= len(m.byKey) || m.byKey[key].requests == nil {
		return
	}
	m.byKey[key].requests.Inc()
	m.byKey[key].time.Observe(d.Seconds())
}
