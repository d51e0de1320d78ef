package backoff

import (
	"testing"
	"testing/synctest"
	"time"
)

func TestDelay(t *testing.T) {
	for _, tt := range []struct {
		base, max time.Duration
		n         int
		want      time.Duration
	}{
		{5 * time.Millisecond, 1000 * time.Second, 0, 5 * time.Millisecond},
		{5 * time.Millisecond, 1000 * time.Second, 1, 10 * time.Millisecond},
		{5 * time.Millisecond, 1000 * time.Second, 10, 5120 * time.Millisecond},
		{5 * time.Millisecond, 1000 * time.Second, 17, 655360 * time.Millisecond},
		{5 * time.Millisecond, 1000 * time.Second, 18, 1000 * time.Second},
		{5 * time.Millisecond, 1000 * time.Second, 62, 1000 * time.Second},
		{5 * time.Millisecond, 1000 * time.Second, 1000, 1000 * time.Second},
		{1, time.Duration(1<<63 - 1), 62, 1 << 62},
		{0, time.Second, 5, 0},
	} {
		if got := Delay(tt.base, tt.max, tt.n); got != tt.want {
			t.Errorf("Delay(%v, %v, %d) = %v, want %v", tt.base, tt.max, tt.n, got, tt.want)
		}
	}
}

func TestLimiter_BucketGivesABurstThenQPS(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLimiter[string](0, 0, 10, 2)
		for i, want := range []time.Duration{0, 0, 100 * time.Millisecond, 200 * time.Millisecond} {
			if got := l.When(""); got != want {
				t.Fatalf("call %d: l.When() = %v, want %v", i, got, want)
			}
		}
		time.Sleep(time.Second) // refills to the burst, not beyond
		for i, want := range []time.Duration{0, 0, 100 * time.Millisecond} {
			if got := l.When(""); got != want {
				t.Fatalf("after 1s, call %d: l.When() = %v, want %v", i, got, want)
			}
		}
		if got := NewLimiter[string](0, 0, 0, 0).When(""); got != 0 {
			t.Fatalf("qps 0: l.When() = %v, want 0 (no limit)", got)
		}
	})
}
