package kafka

import (
	"log/slog"
	"testing"

	"github.com/idemlog/idemlog/batch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// benchRecords builds one plain batch of n records of size bytes.
func benchRecords(b testing.TB, n, size int) []byte {
	bld := batch.NewBuilder(batch.CodecNone)
	for i := range n {
		bld.Append(int64(i), nil, make([]byte, size), nil)
	}
	v, err := bld.Build()
	if err != nil {
		b.Fatal(err)
	}
	return append([]byte(nil), v...)
}

// BenchmarkParseProduce: decoding a produce frame (header, shape walk,
// kmsg) of 4 partitions x 64 KiB; the record batches are not copied.
func BenchmarkParseProduce(b *testing.B) {
	recs := benchRecords(b, 64, 1<<10)
	req := produceReq("t", map[int32][]byte{0: recs, 1: recs, 2: recs, 3: recs})
	frame := req.AppendTo(frameOf(0, req.Version, 1, []byte{0}))
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := parseRequest(frame); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkProduceRoundTrip: one connection, produce requests of one
// 64 x 1 KiB batch, acks=-1, sync policy never, each answered before the
// next is sent (a client's worst case: no pipelining).
func BenchmarkProduceRoundTrip(b *testing.B) {
	ts := startServer(b, Options{Logger: slog.New(slog.DiscardHandler)})
	if err := ts.eng.CreateTopic("t", 1); err != nil {
		b.Fatal(err)
	}
	recs := benchRecords(b, 64, 1<<10)
	rc := dial(b, ts.addr)
	req := produceReq("t", map[int32][]byte{0: recs})
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = req.Version
	b.SetBytes(int64(len(recs)))
	b.ReportAllocs()
	for b.Loop() {
		rc.send(req)
		rc.recv(resp)
		if c := resp.Topics[0].Partitions[0].ErrorCode; c != 0 {
			b.Fatal(c)
		}
	}
}
