// Package watchretry is how kctl's informers try a failed list or watch
// again: the wait before the n-th retry in a row (Wait, from Delay), and
// whether a failure means the resourceVersion or continue token is gone,
// so the informer must list again (Gone); how long a watch asks the
// server to last (Timeout); and the log of a failure and the wait that
// follows it (Pause).
package watchretry

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

const (
	// FirstDelay is the wait before the first retry; it doubles with each.
	FirstDelay = 200 * time.Millisecond
	// MaxDelay is the longest wait.
	MaxDelay = 30 * time.Second
	// NotInstalledDelay is the longest wait for a CRD to appear.
	NotInstalledDelay = 10 * time.Second
)

// Delay is the wait before retry n (1, 2, ...): FirstDelay doubling up to
// limit, less up to half (r in [0, 1)), and at least the server's
// Retry-After.
func Delay(n int, limit time.Duration, r float64, retryAfter time.Duration) time.Duration {
	d := limit
	if n < 30 && FirstDelay<<(n-1) < limit {
		d = FirstDelay << (n - 1)
	}
	return max(d-time.Duration(r*float64(d)/2), retryAfter)
}

// Wait is the wait before retry n (1, 2, ...) after the failure err:
// Delay up to MaxDelay, or NotInstalledDelay where the resource is not
// installed (a CRD to appear), less up to half at random, at least the
// Retry-After of err's server answer.
func Wait(n int, err error, notInstalled bool) time.Duration {
	limit := MaxDelay
	if notInstalled {
		limit = NotInstalledDelay
	}
	after := time.Duration(0)
	if s, ok := apierrors.SuggestsClientDelay(err); ok {
		after = time.Duration(s) * time.Second
	}
	return Delay(n, limit, rand.Float64(), after)
}

// Timeout is how long a watch asks the server to last: fixed if set
// (tests), else 5 to 10 minutes at random, so that watches opened
// together do not end together.
func Timeout(fixed time.Duration) time.Duration {
	if fixed > 0 {
		return fixed
	}
	return 5*time.Minute + rand.N(5*time.Minute)
}

// Gone reports whether the resourceVersion or continue token is too old, so the informer must list again.
func Gone(err error) bool {
	var s apierrors.APIStatus
	return apierrors.IsGone(err) || apierrors.IsResourceExpired(err) || errors.As(err, &s) && s.Status().Code == 410 ||
		strings.Contains(err.Error(), "too old resource version")
}

// Pause logs err, the n-th failure in a row, as msg with attrs and the
// wait before the next try, then waits it out (Wait) or until ctx ends.
// It logs at Warn, or at Debug if quiet: a resource still not installed,
// said once, whose poll goes on quietly.
func Pause(
	ctx context.Context,
	log *slog.Logger,
	quiet bool,
	n int,
	err error,
	notInstalled bool,
	msg string,
	attrs ...any,
) {
	level := slog.LevelWarn
	if quiet {
		level = slog.LevelDebug
	}
	d := Wait(n, err, notInstalled)
	retry := []any{"retryIn", d.Round(time.Millisecond), "failures", n, "err", err}
	log.Log(ctx, level, msg, append(attrs, retry...)...)
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
