// Package watchretry is how kctl's informers try a failed list or watch
// again: the wait before the n-th retry in a row (Delay), and whether a
// failure means the resourceVersion or continue token is gone, so the
// informer must list again (Gone).
package watchretry

import (
	"errors"
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

// Gone reports whether the resourceVersion or continue token is too old, so the informer must list again.
func Gone(err error) bool {
	var s apierrors.APIStatus
	return apierrors.IsGone(err) || apierrors.IsResourceExpired(err) || errors.As(err, &s) && s.Status().Code == 410 ||
		strings.Contains(err.Error(), "too old resource version")
}
