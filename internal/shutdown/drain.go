package shutdown

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/kctl-dev/kctl/internal/errtext"
)

// Queue is what Drain needs of a work queue (kctl's Queue).
type Queue interface {
	// ShutDown stops handing out work, at once.
	ShutDown()
	// ShutDownWithDrain stops handing out work and waits for the work
	// handed out to be done; if ctx ends first, it returns an error.
	ShutDownWithDrain(ctx context.Context) error
}

// Drain ends a term of work (a kctl controller's run) once term, its
// context, has ended: it shuts q down, then cancels work with stop, the
// context the work in flight runs on (which ends by itself when the
// term's lease is lost). It is graceful unless term's cause is lost
// (leadership lost: another replica may already be doing the same work),
// which cancels work at once with that cause. Else the work in flight
// may finish until drainBy's deadline (the Schedule's DrainBy), unless
// work ends first (the lease lost meanwhile). drainBy is asked only then:
// it may fix the Schedule (Begin). Drain logs why it cancels work still
// in flight: the lease lost, or the deadline, with drainBy's timeout (for
// the log) and busy's names of that work.
func Drain(
	term context.Context,
	work context.Context,
	stop context.CancelCauseFunc,
	q Queue,
	lost error,
	drainBy func() (time.Time, time.Duration),
	log *slog.Logger,
	busy func() string,
) {
	if errors.Is(context.Cause(term), lost) {
		log.Warn("leadership lost: cancelling in-flight reconciles")
		stop(context.Cause(term))
		q.ShutDown()
		return
	}
	by, timeout := drainBy()
	drain, cancel := context.WithDeadline(work, by)
	defer cancel()
	err := q.ShutDownWithDrain(drain)
	if errors.Is(context.Cause(drain), lost) {
		log.Warn("leadership lost during shutdown: cancelling in-flight reconciles")
	} else if err != nil {
		log.Warn("shutdown timeout nearly passed: cancelling in-flight reconciles", "timeout", timeout, "inFlight", busy())
	}
	stop(nil)
}

// Busy names the work in flight, each with how long it has run since
// its start in since, sorted, after verb: e.g. "reconciling ns/a (for
// 2.5s), ns/b (for 1s)"; "" if none.
func Busy[K comparable](verb string, since map[K]time.Time) string {
	names := make([]string, 0, len(since))
	for k, start := range since {
		names = append(names, fmt.Sprintf("%v (for %v)", k, time.Since(start).Round(time.Millisecond)))
	}
	if len(names) == 0 {
		return ""
	}
	slices.Sort(names)
	return verb + " " + strings.Join(names, ", ")
}

// WaitDrained is the wait of a work queue's ShutDownWithDrain (kctl's
// Queue), once it has shut down: it returns nil once drained is closed
// (no work handed out is left); else, once stop is closed (a ShutDown
// meanwhile) or ctx ends (wrapping its cause), an error that counts the
// work still handed out (inFlight's n).
func WaitDrained(
	ctx context.Context,
	drained, stop <-chan struct{},
	inFlight func() (n int, unfinished, longest time.Duration),
) error {
	select {
	case <-drained:
		return nil
	case <-stop:
		n, _, _ := inFlight()
		return fmt.Errorf("kctl: queue drain stopped by ShutDown with %d keys still in flight", n)
	case <-ctx.Done():
		n, _, _ := inFlight()
		cause := errtext.Unprefixed(context.Cause(ctx))
		return fmt.Errorf("kctl: queue drain stopped with %d keys still in flight (is a worker stuck or missing a Done?): %w", n, cause)
	}
}
