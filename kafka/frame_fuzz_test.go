package kafka

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// seedFrames are one frame per advertised key at its lowest and highest
// version, with default fields (and a record batch for Produce).
func seedFrames() [][]byte {
	var out [][]byte
	for _, a := range apis {
		for _, v := range []int16{a.min, a.max} {
			req := kmsg.RequestForKey(a.key.Int16())
			req.SetVersion(v)
			if p, ok := req.(*kmsg.ProduceRequest); ok {
				t := kmsg.NewProduceRequestTopic()
				t.Topic = "t"
				rp := kmsg.NewProduceRequestTopicPartition()
				rp.Records = []byte("not a batch but bytes")
				t.Partitions = append(t.Partitions, rp)
				p.Topics = append(p.Topics, t)
			}
			f := frameOf(a.key.Int16(), v, 1, nil)
			if req.IsFlexible() {
				f = append(f, 0)
			}
			out = append(out, req.AppendTo(f))
		}
	}
	return out
}

// FuzzParseRequest: the frame decoder never panics, never accepts what
// kmsg itself rejects, and what it accepts re-encodes to bytes that decode
// to the same encoding again. Differential on the shape walk: a Produce
// the walk rejects must be one kmsg also rejects, or one above the
// partition cap.
func FuzzParseRequest(f *testing.F) {
	for _, fr := range seedFrames() {
		f.Add(fr)
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		h, req, err := parseRequest(frame)
		if err != nil {
			if req != nil {
				t.Fatalf("error %v with a request", err)
			}
			if errors.Is(err, ErrRequestShape) && len(frame) >= minHeader {
				ref := kmsg.NewPtrProduceRequest()
				ref.Version = h.version
				if n, ok := headerLen(frame, ref.IsFlexible()); ok {
					if kerr := ref.ReadFrom(frame[n:]); kerr == nil && partitions(ref) <= maxProducePartions {
						t.Fatalf("shape walk rejected a produce kmsg decodes: %v", err)
					}
				}
			}
			return
		}
		if !supported(h.key, h.version) || req.Key() != h.key || req.GetVersion() != h.version {
			t.Fatalf("accepted key %d v%d as %T v%d", h.key, h.version, req, req.GetVersion())
		}
		enc := req.AppendTo(nil)
		again := kmsg.RequestForKey(h.key)
		again.SetVersion(h.version)
		if err := again.ReadFrom(enc); err != nil {
			t.Fatalf("re-encoded request does not decode: %v", err)
		}
		if enc2 := again.AppendTo(nil); !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding not stable:\n%x\n%x", enc, enc2)
		}
	})
}

// headerLen is the length of a request header: the fixed part, the client
// id and, for flexible versions, the tag section.
func headerLen(frame []byte, flexible bool) (int, bool) {
	if len(frame) < minHeader+2 {
		return 0, false
	}
	n := minHeader + 2
	if l := int(int16(uint16(frame[minHeader])<<8 | uint16(frame[minHeader+1]))); l > 0 {
		n += l
	}
	if flexible {
		if n >= len(frame) || frame[n] != 0 {
			return 0, false // only the empty tag section is handled here
		}
		n++
	}
	return n, n <= len(frame)
}

func partitions(r *kmsg.ProduceRequest) int {
	n := 0
	for _, t := range r.Topics {
		n += len(t.Partitions)
	}
	return n
}

// TestWriteSeedCorpus rewrites testdata/fuzz/FuzzParseRequest from
// seedFrames when IDEMLOG_WRITE_SEEDS=1, so the corpus on disk follows the
// advertised table; otherwise it checks the corpus is there.
func TestWriteSeedCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzParseRequest")
	if os.Getenv("IDEMLOG_WRITE_SEEDS") != "1" {
		ents, err := os.ReadDir(dir)
		if err != nil || len(ents) < len(apis) {
			t.Fatalf("seed corpus %s: %d files, %v (IDEMLOG_WRITE_SEEDS=1 go test -run TestWriteSeedCorpus ./kafka)", dir, len(ents), err)
		}
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, fr := range seedFrames() {
		data := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", fr)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d-key%d", i, int16(fr[0])<<8|int16(fr[1]))), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzHandle: every request the decoder accepts is handled without a
// panic, and the server's state stays usable: after each input a fixed
// produce and fetch still succeed. Handlers run with a cancelled context,
// so long polls and group joins return at once.
func FuzzHandle(f *testing.F) {
	for _, fr := range seedFrames() {
		f.Add(fr)
	}
	ts := startServer(f, Options{Logger: slog.New(slog.DiscardHandler), AutoCreateTopics: true})
	if err := ts.eng.CreateTopic("t", 2); err != nil {
		f.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	good := produceReq("t", map[int32][]byte{0: buildBatch(f, -1, 0, 0, 1)})
	f.Fuzz(func(t *testing.T, frame []byte) {
		h, req, err := parseRequest(frame)
		if err != nil {
			return
		}
		p, ok := ts.srv.handleSafely(ctx, h, req, ts.srv.log)
		if !ok {
			t.Fatalf("handler of %s v%d panicked", kmsg.NameForKey(h.key), h.version)
		}
		if p.finish != nil {
			p.finish()
		}
		if p.resp != nil {
			appendResponse(nil, h.correlation, p.resp)
		}
		if p.release != nil {
			p.release()
		}
		gp := ts.srv.handle(ctx, header{key: 0, version: good.Version}, good)
		gp.finish()
		if c := gp.resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; c != 0 {
			t.Fatalf("a good produce after the input failed: %d", c)
		}
	})
}
