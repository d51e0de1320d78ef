package shutdown

import (
	"fmt"
	"log/slog"
	"time"
)

// LogAbandoned logs, at the End of the schedule, the work that a kctl
// Manager's Start returns without (abandoned names it), if any: it
// ignores its context. timeout is ShutdownTimeout.
func LogAbandoned(log *slog.Logger, timeout time.Duration, abandoned []string) {
	if len(abandoned) == 0 {
		return
	}
	log.Error("kctl: shutdown timeout passed: "+
		"Start returns while these still run, ignoring their context",
		"timeout", timeout,
		"abandoned", abandoned)
}

// LogAbandonedTerm logs, at AbandonAt, the leader work of a term that
// the Manager stops waiting for (abandoned names it), if any, before the
// lease is released. timeout is ShutdownTimeout.
func LogAbandonedTerm(log *slog.Logger, timeout time.Duration, abandoned []string) {
	if len(abandoned) == 0 {
		return
	}
	log.Error("kctl: shutdown timeout passed: "+
		"abandoning leader work that ignores its context; "+
		"the lease is released, "+
		"so another replica may start on the same objects",
		"timeout", timeout,
		"abandoned", abandoned)
}

// AddTooLate is the error of a Manager's Add of the runnable name once
// the shutdown has begun.
func AddTooLate(name string) error {
	return fmt.Errorf("kctl: Add(%q) after Start, "+
		"while the Manager shuts down: it would never run; "+
		"add it before the Manager's context ends", name)
}
