// Package backoff holds the delays of kctl's default RateLimiter: a
// per-key exponential backoff and a token bucket shared by all keys.
package backoff

import (
	"sync"
	"time"
)

// Limiter delays a key by the larger of its exponential backoff and the
// token bucket's wait. It is goroutine-safe. Make it with NewLimiter.
type Limiter[K comparable] struct {
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

// NewLimiter is a Limiter whose backoff is Delay(base, max, n) after n
// failures (base 0: none) and whose bucket holds burst tokens refilled
// at qps per second (qps <= 0: none).
func NewLimiter[K comparable](base, max time.Duration, qps float64, burst int) *Limiter[K] {
	return &Limiter[K]{
		failures: map[K]int{},
		base:     base,
		max:      max,
		qps:      qps,
		burst:    float64(burst),
		tokens:   float64(burst),
		last:     time.Now(),
	}
}

// When counts one more failure of k and returns its delay.
func (l *Limiter[K]) When(k K) time.Duration {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failures[k]++
	d := Delay(l.base, l.max, l.failures[k]-1)
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

// Forget resets k's failure count.
func (l *Limiter[K]) Forget(k K) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.failures, k)
}

// NumRequeues is k's failure count.
func (l *Limiter[K]) NumRequeues(k K) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failures[k]
}

// Delay is base * 2^n capped at max, without overflow.
func Delay(base, max time.Duration, n int) time.Duration {
	if n >= 63 {
		return max
	}
	if base > max>>n {
		return max
	}
	return base << n
}
