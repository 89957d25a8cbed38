package kafka

// DeleteTopics (key 20), versions 0-6: topics deleted by name, or by id
// (v6+); internal topics refused.

import (
	"context"

	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/errcode"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) deleteTopics(ctx context.Context, r *kmsg.DeleteTopicsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DeleteTopicsResponse)
	deadline := s.mutationDeadline()
	type target struct {
		name *string
		id   [16]byte
	}
	var targets []target
	for _, name := range r.TopicNames {
		targets = append(targets, target{name: &name})
	}
	for _, t := range r.Topics {
		targets = append(targets, target{name: t.Topic, id: t.TopicID})
	}
	// Kafka's ControllerApis.deleteTopics: an entry with both a name and
	// an id, or neither, and a name given twice, are INVALID_REQUEST, and
	// nothing is deleted for them. (Without this: a name sent with another
	// topic's id deleted the named one.)
	names := map[string]int{}
	for _, tg := range targets {
		if tg.name != nil {
			names[*tg.name]++
		}
	}
	for _, tg := range targets {
		t := kmsg.NewDeleteTopicsResponseTopic()
		t.Topic, t.TopicID = tg.name, tg.id
		var err error
		switch {
		case tg.name != nil && *tg.name != "" && tg.id != ([16]byte{}):
			err = errcode.New(kerr.InvalidRequest.Code, "both a topic name and a topic id")
		case (tg.name == nil || *tg.name == "") && tg.id == ([16]byte{}):
			err = errcode.New(kerr.InvalidRequest.Code, "neither a topic name nor a topic id")
		case tg.name != nil && names[*tg.name] > 1:
			err = errcode.New(kerr.InvalidRequest.Code, "duplicate topic name")
		}
		if err != nil {
			t.ErrorCode = s.code(kmsg.DeleteTopics, err)
			resp.Topics = append(resp.Topics, t)
			continue
		}
		if tg.name == nil || *tg.name == "" {
			t.Topic = nil
			if name, ok := s.eng.Frontend().TopicByID(tg.id); ok {
				t.Topic = &name
			} else {
				err = ErrUnknownTopicID
			}
		}
		if err == nil {
			if isInternal(*t.Topic) {
				err = engine.ErrInvalidTopic
			} else {
				t.TopicID, _ = s.eng.Frontend().TopicID(*t.Topic)
				err = s.mutate(ctx, deadline, func() error { return s.eng.DeleteTopic(*t.Topic) })
			}
		}
		if err != nil {
			t.ErrorCode = s.code(kmsg.DeleteTopics, err)
		} else {
			s.log.Info("deleted topic", "topic", *t.Topic)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
