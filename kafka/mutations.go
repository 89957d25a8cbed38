package kafka

import (
	"context"
	"fmt"
	"time"

	"github.com/idemlog/idemlog/errcode"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Topic mutations (CreateTopics, CreatePartitions, DeleteTopics,
// AlterConfigs, IncrementalAlterConfigs and Metadata's auto-creation) enter
// the engine one at a time through Server.mutations, as Kafka's controller
// applies them one at a time from its event queue. The engine serializes
// them anyway (its topic lock, its config lock), and one of them can hold
// that lock for long: an alteration of a 65,536-partition topic writes
// every partition's config file. A request waiting on the engine's mutex
// could neither give up nor notice that its client left, so hostile or
// impatient clients piled connections up behind one wide mutation until
// max.connections was reached and every new client waited in the listen
// backlog. A wait in the queue ends instead at the request timeout
// (REQUEST_TIMED_OUT, nothing changed, as Kafka's controller answers an
// event whose deadline passed in its queue) or when the connection closes.

// ErrRequestTimedOut: a request waited RequestTimeout for its turn (a topic
// mutation behind another) and was not carried out (Kafka's
// REQUEST_TIMED_OUT, 7, retriable).
var ErrRequestTimedOut = errcode.New(kerr.RequestTimedOut.Code, "request timed out")

// isMutation reports whether handling req may change topics, and so
// waits for its turn in Server.mutations.
func isMutation(req kmsg.Request) bool {
	switch r := req.(type) {
	case *kmsg.CreateTopicsRequest, *kmsg.CreatePartitionsRequest, *kmsg.DeleteTopicsRequest,
		*kmsg.AlterConfigsRequest, *kmsg.IncrementalAlterConfigsRequest:
		return true
	case *kmsg.MetadataRequest:
		return r.AllowAutoTopicCreation || r.Version < 4
	}
	return false
}

// mutationDeadline is when a topic mutation that arrives now stops waiting
// for its turn; zero: never (RequestTimeout negative).
func (s *Server) mutationDeadline() time.Time {
	if s.opts.RequestTimeout < 0 {
		return time.Time{}
	}
	return time.Now().Add(s.opts.RequestTimeout)
}

// awaitMutation waits for the turn of one topic mutation, until deadline
// (zero: none) or until ctx, the connection's, is done. The returned done
// ends the turn; it must be called once the engine call returns.
func (s *Server) awaitMutation(ctx context.Context, deadline time.Time) (done func(), err error) {
	done = func() { <-s.mutations }
	select {
	case s.mutations <- struct{}{}:
		return done, nil
	default:
	}
	var expired <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		expired = t.C
	}
	select {
	case s.mutations <- struct{}{}:
		return done, nil
	case <-expired:
		return nil, fmt.Errorf("cannot change topics within the request timeout %v: another change holds the engine: %w",
			s.opts.RequestTimeout, ErrRequestTimedOut)
	case <-ctx.Done():
		return nil, fmt.Errorf("cannot change topics: the connection closed while the change waited: %w", ErrRequestTimedOut)
	}
}

// mutate runs change, one topic mutation, in its turn.
func (s *Server) mutate(ctx context.Context, deadline time.Time, change func() error) error {
	done, err := s.awaitMutation(ctx, deadline)
	if err != nil {
		return err
	}
	defer done()
	return change()
}
