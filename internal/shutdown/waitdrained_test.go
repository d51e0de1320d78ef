package shutdown

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestWaitDrained_NilOnceDrained_ElseCountsTheWorkInFlight(t *testing.T) {
	inFlight := func() (int, time.Duration, time.Duration) { return 2, 0, 0 }
	drained := make(chan struct{})
	close(drained)
	if err := WaitDrained(context.Background(), drained, nil, inFlight); err != nil {
		t.Errorf("drained: %v, want nil", err)
	}

	stop := make(chan struct{})
	close(stop)
	err := WaitDrained(context.Background(), nil, stop, inFlight)
	want := "kctl: queue drain stopped by ShutDown with 2 keys still in flight"
	if err == nil || err.Error() != want {
		t.Errorf("stopped: %v, want %q", err, want)
	}

	cause := errors.New("kctl: deadline")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	err = WaitDrained(ctx, nil, nil, inFlight)
	want = "kctl: queue drain stopped with 2 keys still in flight (is a worker stuck or missing a Done?): deadline"
	if err == nil || err.Error() != want || !errors.Is(err, cause) {
		t.Errorf("ctx ended: %v, want %q wrapping its cause", err, want)
	}
}
