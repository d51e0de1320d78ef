package prom

import (
	"fmt"
	"math"
	"sync"
	"testing"
)

func TestHistogram_Observe_CountsIntoFirstBucketAtOrAboveValue(t *testing.T) {
	h := NewHistogram([]float64{1, 2, 5})
	for i, step := range []struct {
		v    float64
		want []uint64 // cumulative le=1, 2, 5, +Inf
	}{
		{0.5, []uint64{1, 1, 1, 1}},
		{1, []uint64{2, 2, 2, 2}}, // le is inclusive
		{1.0000001, []uint64{2, 3, 3, 3}},
		{5, []uint64{2, 3, 4, 4}},
		{7, []uint64{2, 3, 4, 5}},
		{-3, []uint64{3, 4, 5, 6}},
	} {
		h.Observe(step.v)
		got := h.cumulative()
		if fmt.Sprint(got) != fmt.Sprint(step.want) {
			t.Errorf("step %d: after Observe(%v) cumulative() = %v, want %v",
				i, step.v, got, step.want)
		}
	}
	if sum := h.sum.load(); math.Abs(sum-11.5000001) > 1e-9 {
		t.Errorf("sum = %v, want 11.5000001", sum)
	}
}

func TestHistogram_ConcurrentObservations_NoneLost(t *testing.T) {
	h := NewHistogram([]float64{0.005, 0.1, 0.25, 1, 60})
	const goroutines, each = 8, 1000
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range each {
				h.Observe(0.25) // exact in binary: the sum is exact too
			}
		})
	}
	wg.Wait()
	c := h.cumulative()
	if got := c[len(c)-1]; got != goroutines*each {
		t.Errorf("count = %d, want %d", got, goroutines*each)
	}
	if got := h.sum.load(); got != 0.25*goroutines*each {
		t.Errorf("sum = %v, want %v", got, 0.25*goroutines*each)
	}
}
