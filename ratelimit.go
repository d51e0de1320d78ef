package kctl

// The queue is four files, each using only the files before it, and
// internal/keyline, the lines (FIFO, and low keys behind normal ones)
// that queued keys wait in:
//
//	ratelimit.go      the RateLimiter behind AddRateLimited
//	queue_delay.go    the heap of keys that wait for a time, and its timer
//	queue.go          the Queue: its line, processing, delays, pacing
//	queue_shutdown.go how it ends: ShutDown, ShutDownWithDrain
//
// The first two use no other file: a RateLimiter knows nothing of the
// queue.

import (
	"sync"
	"time"
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
	return &rateLimiter[K]{
		failures: map[K]int{},
		base:     base,
		max:      max,
		qps:      qps,
		burst:    float64(burst),
		tokens:   float64(burst),
		last:     time.Now(),
	}
}

type rateLimiter[K comparable] struct {
	mu sync.Mutex
	// failures counts the When calls of each key since its Forget; a key
	// with none is not in the map.
	failures map[K]int
	base     time.Duration
	max      time.Duration
	qps      float64
	burst    float64
	// tokens is what the bucket held at last, at most burst. It goes
	// negative when When promises tokens to keys that wait for them.
	tokens float64
	last   time.Time
}

func (l *rateLimiter[K]) When(k K) time.Duration {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failures[k]++
	d := backoff(l.base, l.max, l.failures[k]-1)
	if l.qps <= 0 {
		return d
	}
	refill := now.Sub(l.last).Seconds() * l.qps
	l.tokens = min(l.burst, l.tokens+refill)
	l.last = now
	l.tokens--
	// While tokens last, this is <= 0; then it is the wait for the next.
	wait := -l.tokens / l.qps * float64(time.Second)
	return max(d, time.Duration(wait))
}

func (l *rateLimiter[K]) Forget(k K) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.failures, k)
}

func (l *rateLimiter[K]) NumRequeues(k K) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failures[k]
}

// backoff is base * 2^n capped at max, without overflow.
func backoff(base, max time.Duration, n int) time.Duration {
	if n >= 63 {
		return max
	}
	if base > max>>n {
		return max
	}
	return base << n
}
