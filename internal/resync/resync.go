// Package resync schedules kctl's periodic resync (see kctl's
// CacheOptions.Resync): when each resync starts, and how one resync's
// re-deliveries are spread so that they never arrive as one burst. It
// knows nothing of what is re-delivered: the caller snapshots its keys
// and delivers each batch.
//
// One resync re-delivers the keys of its snapshot in order, in up to
// MaxSteps batches, evenly spaced over the first half of the period
// (Window). Each resync starts a period after the one before started.
// One goroutine and one timer do it all.
package resync

import (
	"context"
	"math/rand/v2"
	"time"
)

// MaxSteps bounds the batches of one resync: the timer wakes at most
// this often, and at most once a millisecond, per resync.
const MaxSteps = 1000

// Jitter is d stretched by a random 0-10 %, so that informers with one
// period do not resync at once; 0 (never) stays 0.
func Jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return d + rand.N(d/10+1)
}

// Window is how much of the period d one resync is spread over.
func Window(d time.Duration) time.Duration { return d / 2 }

// Steps is the number of batches n keys are re-delivered in over
// window: one per key, at most MaxSteps and one a millisecond.
func Steps(n int, window time.Duration) int {
	perMs := int(window / time.Millisecond)
	return min(n, MaxSteps, max(perMs, 1))
}

// Run resyncs every period until ctx ends. Each resync takes a snapshot
// of keys (in the order to deliver them; none: nothing to do) and hands
// it to deliver in Steps batches over Window(period), each batch when
// it is due. deliver runs on Run's goroutine, one batch at a time.
func Run[K any](
	ctx context.Context,
	period time.Duration,
	keys func() []K,
	deliver func(batch []K),
) {
	window := Window(period)
	t := time.NewTimer(period)
	defer t.Stop()
	next := time.Now().Add(period)
	for sleepUntil(ctx, t, next) {
		start := time.Now()
		next = start.Add(period)
		snapshot := keys()
		n := len(snapshot)
		steps := Steps(n, window)
		for j := range steps {
			at := window * time.Duration(j)
			at /= time.Duration(steps)
			if !sleepUntil(ctx, t, start.Add(at)) {
				return
			}
			lo := n * j / steps
			hi := n * (j + 1) / steps
			deliver(snapshot[lo:hi])
		}
	}
}

// sleepUntil waits on t until at; false if ctx ended first.
func sleepUntil(
	ctx context.Context,
	t *time.Timer,
	at time.Time,
) bool {
	d := time.Until(at)
	if d <= 0 {
		return ctx.Err() == nil
	}
	t.Reset(d)
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
