package engine

import "time"

// testKnobs are the settings only this package's tests change, kept per
// engine in Options.private (unexported, so an embedding program cannot
// set them): each engine reads its own, so that a test setting one runs in
// parallel with tests that do not. Zero values mean the production
// behaviour. A test sets them in the Options it opens with, or on
// e.opts.private before the operation that reads them starts (the
// operation then happens after the write in the same goroutine, or after
// a synchronizing call that starts it).
type testKnobs struct {
	// openProgressEvery is how often a long Open logs how far it got
	// (0: defaultOpenProgressEvery).
	openProgressEvery time.Duration
	// applyRetentionHook runs in applyRetention before each partition's
	// retention.
	applyRetentionHook func(p *Partition)
	// decisionSyncHook fails a decision's sync when it returns an error
	// (waitDecision).
	decisionSyncHook func() error
	// decidingHook runs in endLocked while a decision waits for its sync,
	// with the coordinator's mutex released.
	decidingHook func(id string)
	// offsetsAppendedHook runs between a transactional offset commit's
	// write and its registration.
	offsetsAppendedHook func(p *Partition, pid int64, epoch int16)
	// offsetsTombstonedHook runs between an offsets deletion's write and
	// its registration.
	offsetsTombstonedHook func(p *Partition)
	// createTopicStepHook runs after each durable step of a creation of
	// topic's partitions ("synced": the temporary directories; "intent";
	// "renamed one": the first partition in place), for crash tests that
	// die there and tests that hold a creation there.
	createTopicStepHook func(topic, step string)
	// deleteTopicStepHook runs after each durable step of DeleteTopic
	// ("intent", "tombstones", "renames"), for crash tests.
	deleteTopicStepHook func(step string)
}

// defaultOpenProgressEvery is how often a long Open logs how far it got.
const defaultOpenProgressEvery = 10 * time.Second

func (k *testKnobs) createTopicStep(topic, step string) {
	if h := k.createTopicStepHook; h != nil {
		h(topic, step)
	}
}

func (k *testKnobs) deleteTopicStep(step string) {
	if h := k.deleteTopicStepHook; h != nil {
		h(step)
	}
}
