package transport

import (
	"testing"
	"time"
)

// A watch's own bound is a little past its timeoutSeconds (the other
// requests' 70 s is TestNew_NoTimeout_...).
func TestWatchBound_IsALittlePastTheTimeoutItAsks(t *testing.T) {
	for _, c := range []struct{ timeout, want time.Duration }{
		{time.Second, 2100 * time.Millisecond},
		{5 * time.Minute, 5*time.Minute + 31*time.Second},
		{10 * time.Minute, 10*time.Minute + 31*time.Second},
	} {
		if got := WatchBound(c.timeout); got != c.want {
			t.Errorf("WatchBound(%v) = %v, want %v", c.timeout, got, c.want)
		}
	}
}
