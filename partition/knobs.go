package partition

// logKnobs are the settings only this package's tests change, kept per log
// in Options.private (unexported): each log reads its own, so that a test
// setting one runs in parallel with others. Zero values mean the
// production behaviour. A test sets them in the Options it opens with, or
// on l.opts.private before it starts the operation that reads them.
type logKnobs struct {
	// readRaceHook runs in read between the range check and the segment
	// search.
	readRaceHook func()
	// afterSyncDataHook runs in a group sync after its fdatasyncs, before
	// it counts anything durable.
	afterSyncDataHook func(l *Log)
	// cleanStepHook runs at each step of a cleaning's copy and swap
	// ("copying", "cleaned", "swap-partial", "swapped", "done",
	// "deleted-partial", "deleted", "final-partial") with the step's name,
	// for crash tests that die there.
	cleanStepHook func(step string)
}
