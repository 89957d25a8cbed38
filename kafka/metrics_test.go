package kafka

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestMetrics: requests, errors, bytes and the gauges move with traffic.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	ts := startServer(t, Options{Registerer: reg})
	if err := ts.eng.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	cl := ts.client(t, kgo.DefaultProduceTopic("t"))
	for range 10 {
		if err := cl.ProduceSync(ctxT(t), &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	rc := dial(t, ts.addr)
	rc.roundTrip(produceReq("missing", map[int32][]byte{0: buildBatch(t, -1, 0, 0, 1)}))

	if n := value(t, ts.srv.m.requests.WithLabelValues("Produce")); n < 11 {
		t.Errorf("produce requests %v, want >= 11", n)
	}
	if n := value(t, ts.srv.m.errors.WithLabelValues("Produce", "3")); n != 1 {
		t.Errorf("UNKNOWN_TOPIC_OR_PARTITION count %v, want 1", n)
	}
	if n := value(t, ts.srv.m.recordsIn); n != 10 {
		t.Errorf("records in %v, want 10", n)
	}
	if n := value(t, ts.srv.m.bytesIn); n <= 0 {
		t.Errorf("bytes in %v", n)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	all := strings.Join(names, " ")
	for _, want := range []string{"idemlog_kafka_requests_total", "idemlog_kafka_errors_total", "idemlog_kafka_bytes_in_total",
		"idemlog_kafka_bytes_out_total", "idemlog_append_seconds", "idemlog_fetch_seconds", "idemlog_producers",
		"idemlog_open_transactions", "idemlog_lso_lag_offsets", "idemlog_kafka_connections"} {
		if !strings.Contains(all, want) {
			t.Errorf("metric %s not exported (have %s)", want, all)
		}
	}
	if n := value(t, ts.srv.m.gauges[0].(prometheus.Metric)); n != 1 {
		t.Errorf("producers gauge %v, want 1", n)
	}
}

// value reads a counter's or gauge's current value.
func value(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		t.Fatal(err)
	}
	if c := d.GetCounter(); c != nil {
		return c.GetValue()
	}
	return d.GetGauge().GetValue()
}
