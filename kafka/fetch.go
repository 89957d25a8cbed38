package kafka

// Fetch (key 1), versions 4-12: record batches of partitions from an
// offset, as the segments hold them, up to the high watermark (the last
// stable offset under read_committed, with the aborted transactions in
// range), parked up to MaxWaitMillis (capped by Options.RequestTimeout) for
// MinBytes. Fetch sessions (KIP-227) are not kept: clients send full
// fetches.

import (
	"context"
	"reflect"
	"time"

	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/partition"
	"github.com/idemlog/idemlog/txnindex"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var errFetchSessionNotFound = newCodeErr(kerr.FetchSessionIDNotFound.Code, "fetch sessions are not kept: send full fetches")

// fetchState is one Fetch being answered: the partitions it names and the
// chunks its response aliases, released once the response is encoded.
type fetchState struct {
	parts  [][]*engine.Partition // by topic, by partition; nil: unknown
	errs   [][]error
	chunks []partition.Chunk
	abort  []txnindex.Entry
}

func (f *fetchState) release() {
	for i := range f.chunks {
		f.chunks[i].Release()
	}
	f.chunks = f.chunks[:0]
}

// fetch answers with whole stored batches, as they are in the segments: at
// least one batch (KIP-74) even above the byte limits, so a consumer never
// stalls on a large batch. Under read_committed it stops at the last stable
// offset, includes the control batches (clients use the markers), and lists
// the aborted transactions that overlap what it returns. It parks, up to
// MaxWait, until MinBytes are available, woken by any advance of a named
// partition's high watermark (which also covers LSO moves, as each is the
// append of a marker).
//
// Fetch sessions (KIP-227) are not kept: every response has session id 0,
// which tells clients to send full fetches.
func (s *Server) fetch(ctx context.Context, r *kmsg.FetchRequest) pending {
	start := time.Now()
	f := &fetchState{}
	f.parts = make([][]*engine.Partition, len(r.Topics))
	f.errs = make([][]error, len(r.Topics))
	var waitOn []*engine.Partition
	for ti, rt := range r.Topics {
		f.parts[ti] = make([]*engine.Partition, len(rt.Partitions))
		f.errs[ti] = make([]error, len(rt.Partitions))
		for pi, rp := range rt.Partitions {
			p, err := s.eng.Partition(rt.Topic, int(rp.Partition))
			f.parts[ti][pi], f.errs[ti][pi] = p, err
			if err == nil {
				waitOn = append(waitOn, p)
			}
		}
	}
	var resp *kmsg.FetchResponse
	if r.Version >= 7 && r.SessionEpoch != 0 && r.SessionEpoch != -1 {
		resp = r.ResponseKind().(*kmsg.FetchResponse)
		resp.ErrorCode = s.code(kmsg.Fetch, errFetchSessionNotFound)
		return pending{resp: resp}
	}
	// The wait is the client's, up to RequestTimeout: a MaxWaitMillis of
	// 2^31-1 would park the request for 24.8 days.
	wait := time.Duration(r.MaxWaitMillis) * time.Millisecond
	if rt := s.opts.RequestTimeout; rt > 0 && wait > rt {
		wait = rt
	}
	deadline := start.Add(wait)
	var cases []reflect.SelectCase
	for {
		// Take the wake-up channels before reading: an advance after the
		// read closes a channel taken before it.
		chans := cases[:0]
		for _, p := range waitOn {
			chans = append(chans, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(p.Advanced())})
		}
		cases = chans
		var bytes int
		var anyErr, more bool
		resp, bytes, anyErr, more = s.readFetch(r, f)
		now := time.Now()
		if bytes >= int(r.MinBytes) || anyErr || more || !now.Before(deadline) || len(waitOn) == 0 || ctx.Err() != nil {
			break
		}
		f.release()
		timer := time.NewTimer(deadline.Sub(now))
		cases = append(cases,
			reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer.C)},
			reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())})
		reflect.Select(cases)
		timer.Stop()
		cases = cases[:len(waitOn)]
	}
	s.m.fetchLatency.Observe(time.Since(start).Seconds())
	size := 0
	for i := range f.chunks {
		size += len(f.chunks[i].Data)
	}
	return pending{resp: resp, release: f.release, size: size}
}

// fetchMaxBytes is Kafka's broker fetch.max.bytes default (55 MiB): the
// most record bytes one fetch response carries beyond its first batch.
const fetchMaxBytes = 57671680

// readFetch builds one fetch response from the partitions' current state.
func (s *Server) readFetch(r *kmsg.FetchRequest, f *fetchState) (*kmsg.FetchResponse, int, bool, bool) {
	resp := r.ResponseKind().(*kmsg.FetchResponse)
	// The response's limit is the request's (from v3) and the broker's
	// fetch.max.bytes, whichever is smaller; a limit of 0 or less still
	// returns the first batch (KIP-74), it is not "no limit". (Without
	// this: MaxBytes 0 returned everything.)
	budget := fetchMaxBytes
	if r.Version >= 3 {
		budget = max(0, min(budget, int(r.MaxBytes)))
	}
	total, anyErr, more, first := 0, false, false, true
	for ti, rt := range r.Topics {
		t := kmsg.NewFetchResponseTopic()
		t.Topic = rt.Topic
		t.Partitions = make([]kmsg.FetchResponseTopicPartition, len(rt.Partitions))
		for pi, rp := range rt.Partitions {
			out := &t.Partitions[pi]
			*out = kmsg.NewFetchResponseTopicPartition()
			out.Partition = rp.Partition
			out.RecordBatches = []byte{} // never null: librdkafka rejects it
			p, err := f.parts[ti][pi], f.errs[ti][pi]
			if err != nil {
				out.ErrorCode = s.code(kmsg.Fetch, err)
				out.HighWatermark, out.LastStableOffset, out.LogStartOffset = -1, -1, -1
				anyErr = true
				continue
			}
			l := s.eng.Frontend().Log(p)
			out.HighWatermark = l.HighWatermark()
			out.LastStableOffset = p.LastStableOffset()
			out.LogStartOffset = l.LogStartOffset()
			// The single node's leader epoch is 0 (Metadata says so): a
			// client that knows a later one is ahead of this log, which
			// Kafka answers UNKNOWN_LEADER_EPOCH. -1 is no epoch.
			if rp.CurrentLeaderEpoch > 0 {
				out.ErrorCode = s.code(kmsg.Fetch, errLeaderEpochAhead)
				anyErr = true
				continue
			}
			limit := min(int(rp.PartitionMaxBytes), budget)
			if limit <= 0 && !first {
				continue
			}
			var c partition.Chunk
			if r.IsolationLevel == 1 {
				out.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
				c, f.abort, err = p.ReadCommitted(rp.FetchOffset, max(limit, 1), f.abort[:0])
				for _, a := range f.abort {
					at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
					at.ProducerID, at.FirstOffset = a.ProducerID, a.FirstOffset
					out.AbortedTransactions = append(out.AbortedTransactions, at)
				}
			} else {
				c, err = p.Read(rp.FetchOffset, max(limit, 1))
			}
			bound := out.HighWatermark
			if r.IsolationLevel == 1 {
				bound = out.LastStableOffset
			}
			if err == nil && c.NextOffset < bound {
				// The read stopped short of what is there (a segment's
				// end): answer now, as Kafka's DelayedFetch does for a
				// fetch on an older segment; nothing would wake a wait.
				// (Without this: it waited the whole MaxWait.)
				more = true
			}
			if err != nil {
				out.ErrorCode = s.code(kmsg.Fetch, err)
				anyErr = true
				continue
			}
			if len(c.Data) > 0 && !first && len(c.Data) > limit {
				// Only the first partition with data may exceed the limits.
				c.Release()
				out.AbortedTransactions = out.AbortedTransactions[:0]
				continue
			}
			f.chunks = append(f.chunks, c)
			if len(c.Data) > 0 {
				out.RecordBatches = c.Data
				first = false
				total += len(c.Data)
				budget -= len(c.Data)
			}
		}
		resp.Topics = append(resp.Topics, t)
	}
	s.m.bytesFetched.Add(float64(total))
	return resp, total, anyErr, more
}

// errLeaderEpochAhead: a Fetch or ListOffsets with a current leader epoch
// above this single node's 0.
var errLeaderEpochAhead = newCodeErr(kerr.UnknownLeaderEpoch.Code, "current leader epoch ahead of the log's (0)")
