package kctl

// What a Queue tells of itself beyond the data path (floor 2): whether it
// shuts down, and when a waiting key comes back (for KeepHistory). The
// data path (queue.go) calls neither. And NewRateLimiter, whose default
// delays NewQueue makes with internal/backoff.

import (
	"time"

	"github.com/kctl-dev/kctl/internal/backoff"
)

// ShuttingDown reports whether ShutDown was called.
func (q *Queue[K]) ShuttingDown() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.keys.Closed()
}

// WaitingUntil reports when k's wait to be added ends, if k waits
// (AddAfter, AddRateLimited, Debounce, MinInterval).
func (q *Queue[K]) WaitingUntil(k K) (time.Time, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.keys.WaitingUntil(k)
}

// NewRateLimiter delays a key by the larger of its exponential backoff (base *
// 2^failures capped at max; failures counts its When calls since its Forget;
// base 0: none) and a token bucket shared by all keys (burst tokens refilled at
// qps per second, one taken by each When; qps <= 0: none).
//
// Every Queue and Controller defaults to controller-runtime's (and client-go's
// DefaultTypedControllerRateLimiter) limits:
//
//	kctl.NewRateLimiter[kctl.Key](5*time.Millisecond, 1000*time.Second, 10, 100)
//
// that is 5 ms, 10 ms, 20 ms, ... up to 1000 s (reached at the 19th failure
// in a row), and at most 100 retries at once, then 10 per second.
func NewRateLimiter[K comparable](base, max time.Duration, qps float64, burst int) RateLimiter[K] {
	return backoff.NewLimiter[K](base, max, qps, burst)
}
