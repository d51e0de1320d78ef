package kctl

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

// The default retry limits are controller-runtime's
// (workqueue.DefaultTypedControllerRateLimiter): per key 5 ms doubling up to
// 1000 s, and a bucket of 100 tokens refilled at 10 per second over all keys.
func TestQueue_DefaultRateLimiter_IsControllerRuntimes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rl := NewQueue(QueueOptions[Key]{}).rl // what every controller gets without WithRateLimiter
		calls := 0                             // the clock stands still: each call takes a token for good
		want := func(failures int) time.Duration {
			perKey := min(5*time.Millisecond<<min(failures-1, 40), 1000*time.Second)
			bucket := time.Duration(max(calls-100, 0)) * 100 * time.Millisecond
			return max(perKey, bucket)
		}
		for n := 1; n <= 40; n++ {
			calls++
			if got := rl.When(Key{Name: "a"}); got != want(n) {
				t.Fatalf("failure %d of one key: When = %v, want %v", n, got, want(n))
			}
		}
		for i := range 80 {
			calls++
			k := Key{Name: fmt.Sprint("b", i)}
			if got := rl.When(k); got != want(1) {
				t.Fatalf("call %d overall, the first failure of %s: When = %v, want %v", calls, k, got, want(1))
			}
		}
		if got := rl.NumRequeues(Key{Name: "a"}); got != 40 {
			t.Errorf("NumRequeues = %d, want 40", got)
		}
	})
}
