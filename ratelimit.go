package kctl

// The queue is three files, each using only the files before it, and
// three leaves: internal/backoff (the default RateLimiter's delays),
// internal/keywait (the keys that wait for a time, in a heap with one
// timer) and internal/keyline (the lines queued keys wait in):
//
//	ratelimit.go      the RateLimiter behind AddRateLimited
//	queue.go          the Queue: its line, processing, delays, pacing
//	queue_shutdown.go how it ends: ShutDown, ShutDownWithDrain

import (
	"time"

	"github.com/kctl-dev/kctl/internal/backoff"
)

// RateLimiter decides how long AddRateLimited waits before adding a key.
// Implementations must be goroutine-safe; the queue calls them outside its lock.
type RateLimiter[K comparable] interface {
	When(k K) time.Duration // counts one more failure of k and returns its delay
	Forget(k K)             // resets k's failure count
	NumRequeues(k K) int    // k's failure count
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
