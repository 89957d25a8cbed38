package engine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/internal/testutil"
)

func maxTimestampBatch(t testing.TB, codec batch.Codec, pid int64, epoch int16, seq int32, tss []int64, header int64) []byte {
	t.Helper()
	v := batch.Batch(testutil.Batch(t, testutil.BatchSpec{Codec: codec, Producer: pid >= 0, PID: pid, Epoch: epoch, Seq: seq,
		Timestamps: tss, Value: func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 50) }}))
	setBatchMaxTimestamp(v, header)
	return v
}

// setBatchMaxTimestamp writes ts into b's header max timestamp, leaving its
// timestamp type, and reseals the CRC: a client's batch as sent.
func setBatchMaxTimestamp(b batch.Batch, ts int64) {
	binary.BigEndian.PutUint64(b[35:], uint64(ts))
	binary.BigEndian.PutUint32(b[17:], b.ComputeCRC())
}

func TestCorrectedRetryAllCodecs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	if err := e.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	p, _ := e.Partition("t", 0)
	pid, epoch, _ := e.initProducerID()
	now := time.Now().UnixMilli()
	codecs := []batch.Codec{batch.CodecNone, batch.CodecGzip, batch.CodecSnappy, batch.CodecLZ4, batch.CodecZstd}
	var origs [][]byte
	var bases []int64
	seq := int32(0)
	for i, c := range codecs {
		tss := []int64{now + 5, now + 100, now - 3}
		hdr := now + 1 // wrong
		if i%2 == 1 {
			hdr = now + 1000 // wrong the other way
		}
		orig := maxTimestampBatch(t, c, pid, epoch, seq, tss, hdr)
		seq += 3
		origs = append(origs, bytes.Clone(orig))
		res, err := p.Append(orig)
		if err != nil || res.Duplicate {
			t.Fatalf("%v: %+v %v", c, res, err)
		}
		bases = append(bases, res.BaseOffset)
		// The correction is made in the stored copy: the caller's bytes
		// are left as sent (they may be shared; TestSameSliceTwoPartitions).
		if !bytes.Equal(orig, origs[len(origs)-1]) {
			t.Errorf("%v: the caller's bytes were modified", c)
		}
		st := firstBatch(t, p, res.BaseOffset)
		if st.MaxTimestamp() != now+100 || st.CRC() != st.ComputeCRC() {
			t.Errorf("%v: stored max %d crc ok %v", c, st.MaxTimestamp(), st.CRC() == st.ComputeCRC())
		}
		if _, err := batch.Validate(st, 1<<20); err != nil {
			t.Errorf("%v: stored batch invalid: %v", c, err)
		}
	}
	// Retry the original (uncorrected) bytes of each of the last five.
	for i := range origs {
		res, err := p.Append(bytes.Clone(origs[i]))
		if err != nil || !res.Duplicate || res.BaseOffset != bases[i] {
			t.Errorf("retry %d: %+v %v want dup at %d", i, res, err, bases[i])
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openEngine(t, dir, Options{})
	defer e.Close()
	p, _ = e.Partition("t", 0)
	// Kafka's snapshot keeps the newest batch only.
	for i := len(origs) - 1; i < len(origs); i++ {
		res, err := p.Append(bytes.Clone(origs[i]))
		if err != nil || !res.Duplicate || res.BaseOffset != bases[i] {
			t.Errorf("retry after restart %d: %+v %v want dup at %d", i, res, err, bases[i])
		}
	}
	if leo := p.log.LogEndOffset(); leo != 15 {
		t.Errorf("log end %d want 15", leo)
	}
}

func TestEdgeTimestamps(t *testing.T) {
	t.Parallel()
	e := openEngine(t, t.TempDir(), Options{})
	defer e.Close()
	if err := e.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	p, _ := e.Partition("t", 0)
	cases := []struct {
		tss  []int64
		hdr  int64
		want int64
	}{
		{[]int64{-1, -1}, 5, -1},
		{[]int64{-5, -7}, 5, -1},
		{[]int64{-1, 7}, -1, 7},
		{[]int64{1 << 62, 3}, 0, 1 << 62},
	}
	for i, c := range cases {
		for _, codec := range []batch.Codec{batch.CodecNone, batch.CodecZstd} {
			b := maxTimestampBatch(t, codec, -1, 0, 0, c.tss, c.hdr)
			res, err := p.Append(b)
			if err != nil {
				t.Errorf("case %d %v: %v", i, codec, err)
				continue
			}
			st := firstBatch(t, p, res.BaseOffset)
			if st.MaxTimestamp() != c.want || st.CRC() != st.ComputeCRC() {
				t.Errorf("case %d %v: max %d want %d crc ok %v", i, codec, st.MaxTimestamp(), c.want, st.CRC() == st.ComputeCRC())
			}
		}
	}
}

func TestSameSliceTwoPartitions(t *testing.T) {
	t.Parallel()
	e := openEngine(t, t.TempDir(), Options{})
	defer e.Close()
	if err := e.CreateTopic("t", 2); err != nil {
		t.Fatal(err)
	}
	p0, _ := e.Partition("t", 0)
	p1, _ := e.Partition("t", 1)
	for i := 0; i < 20; i++ {
		b := maxTimestampBatch(t, batch.CodecNone, -1, 0, 0, []int64{10, 20}, 1)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for j, p := range []*Partition{p0, p1} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[j] = p.Append(b)
			}()
		}
		wg.Wait()
		if errs[0] != nil || errs[1] != nil {
			t.Fatal(fmt.Sprint(errs))
		}
	}
}

// Kafka's LogValidator (topic CreateTime, idemlog's only type) calls
// batch.setMaxTimestamp(CREATE_TIME, max) for every v2 client batch; a
// client batch flagged LogAppendTime has its records read at the header's
// max, and the attribute rewritten to CreateTime, CRC resealed.
func TestClientLogAppendTimeBatch(t *testing.T) {
	t.Parallel()
	e := openEngine(t, t.TempDir(), Options{})
	defer e.Close()
	if err := e.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	p, _ := e.Partition("t", 0)
	b := maxTimestampBatch(t, batch.CodecNone, -1, 0, 0, []int64{10, 20}, 500)
	b[22] |= 0x08 // LogAppendTime
	setBatchMaxTimestamp(b, 500)
	res, err := p.Append(b)
	if err != nil {
		t.Fatal(err)
	}
	st := firstBatch(t, p, res.BaseOffset)
	if st.LogAppendTime() || st.MaxTimestamp() != 500 || st.CRC() != st.ComputeCRC() {
		t.Fatalf("stored: LogAppendTime %v max %d crc ok %v; Kafka stores CreateTime, max 500", st.LogAppendTime(), st.MaxTimestamp(), st.CRC() == st.ComputeCRC())
	}
}
