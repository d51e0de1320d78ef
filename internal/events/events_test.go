package events

import (
	"testing"
	"time"
)

func TestTokenBucket_Take(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := &tokenBucket{tokens: Burst, last: t0}
	for i, step := range []struct {
		at   time.Duration // since t0
		n    int           // takes
		want int           // successful takes
	}{
		{0, 30, 25},
		{Refill - time.Second, 1, 0},
		{Refill, 2, 1},
		{3 * Refill, 5, 2},
		{1000 * Refill, 30, 25}, // refills to the burst, no more
	} {
		got := 0
		for range step.n {
			if b.take(t0.Add(step.at)) {
				got++
			}
		}
		if got != step.want {
			t.Errorf("step %d: %d x take(t0+%v) succeeded %d times, want %d", i, step.n, step.at, got, step.want)
		}
	}
}
