package resync

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

func TestSteps_BoundsTheBatchesOfOneResync(t *testing.T) {
	for _, tc := range []struct {
		n      int
		window time.Duration
		want   int
	}{
		{0, time.Minute, 0},
		{10, time.Second, 10},             // one object a batch
		{100000, 5 * time.Minute, 1000},   // at most MaxSteps
		{5000, 10 * time.Millisecond, 10}, // at most one a millisecond
		{3, 0, 1},
	} {
		if got := Steps(tc.n, tc.window); got != tc.want {
			t.Errorf("Steps(%d, %v) = %d, want %d", tc.n, tc.window, got, tc.want)
		}
	}
}

func TestJitter_StretchesByUpToTenPercent(t *testing.T) {
	d := time.Second
	seen := map[time.Duration]bool{}
	for range 1000 {
		got := Jitter(d)
		if got < d || got > d+d/10 {
			t.Fatalf("Jitter(%v) = %v, want within [%v, %v]", d, got, d, d+d/10)
		}
		seen[got] = true
	}
	if len(seen) < 100 {
		t.Errorf("Jitter(%v) took %d distinct values in 1000 draws, want a spread", d, len(seen))
	}
	if got := Jitter(0); got != 0 {
		t.Errorf("Jitter(0) = %v, want 0 (never)", got)
	}
}

// Every key of a snapshot is delivered once per resync, in order, each
// batch within the first half of the period, and the next resync starts
// a period after the one before.
func TestRun_DeliversEachKeyOncePerResync_WithinTheWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		period := 10 * time.Second
		keys := []int{0, 1, 2, 3, 4, 5, 6, 7}
		begin := time.Now()
		var got []int
		var at []time.Duration
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			Run(ctx, period, func() []int { return keys }, func(b []int) {
				got = append(got, b...)
				at = append(at, time.Since(begin))
			})
		}()
		time.Sleep(2*period + Window(period))
		cancel()
		<-done
		if len(got) != 2*len(keys) {
			t.Fatalf("delivered %v in two periods, want each of %v twice", got, keys)
		}
		for j, k := range got {
			if k != keys[j%len(keys)] {
				t.Fatalf("delivered %v, want %v in order, twice", got, keys)
			}
		}
		for j, d := range at {
			from := period * time.Duration(1+j/len(keys))
			if d < from || d >= from+Window(period) {
				t.Errorf("batch %d at %v, want within [%v, %v)", j, d, from, from+Window(period))
			}
		}
	})
}
