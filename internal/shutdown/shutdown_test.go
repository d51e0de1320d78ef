package shutdown

import (
	"slices"
	"testing"
	"time"
)

func TestShutdown_Schedule_KeepsAFifthAtMostTwoSecondsForTheLastSteps(t *testing.T) {
	for _, tc := range []struct {
		timeout                               time.Duration
		drainBy, abandonAt, writesBy, endTime time.Duration // after t0
	}{
		{3 * time.Second, 2400 * time.Millisecond, 2700 * time.Millisecond, 2850 * time.Millisecond, 3 * time.Second},
		{30 * time.Second, 28 * time.Second, 29 * time.Second, 29500 * time.Millisecond, 30 * time.Second},
	} {
		s := &Schedule{Timeout: tc.timeout}
		t0 := s.Begin()
		got := []time.Duration{s.DrainBy().Sub(t0), s.AbandonAt().Sub(t0), s.WritesBy().Sub(t0), s.End().Sub(t0)}
		want := []time.Duration{tc.drainBy, tc.abandonAt, tc.writesBy, tc.endTime}
		if !slices.Equal(got, want) {
			t.Errorf("ShutdownTimeout %v: DrainBy, AbandonAt, WritesBy, End = %v after t0, want %v", tc.timeout, got, want)
		}
	}
}
