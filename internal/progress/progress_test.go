package progress

import (
	"context"
	"errors"
	"sync"
	"testing"
)

func TestWait_ReturnsOnceDoneAfterANotify(t *testing.T) {
	var mu sync.Mutex
	var s Signal
	done := false
	state := func() (bool, bool, error) { return done, false, nil }
	result := make(chan error)
	go func() { result <- Wait(context.Background(), &mu, &s, "cache of pods/v1", "sync", state) }()
	for {
		mu.Lock()
		waiting := s.ch != nil
		if waiting {
			done = true
			s.Notify()
		}
		mu.Unlock()
		if waiting {
			break
		}
	}
	if err := <-result; err != nil {
		t.Fatalf("Wait = %v, want nil", err)
	}
	if s.ch != nil {
		t.Error("Notify left the channel of the woken waiters")
	}
}

func TestWait_SaysWhyNot(t *testing.T) {
	var mu sync.Mutex
	var s Signal
	stopped := func() (bool, bool, error) { return false, true, nil }
	err := Wait(context.Background(), &mu, &s, "cache of pods/v1", "sync", stopped)
	want := "kctl: cache of pods/v1 stopped before it could sync"
	if err == nil || err.Error() != want {
		t.Errorf("stopped: Wait = %v, want %q", err, want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	failure := errors.New("kctl: pods/v1 is not installed")
	failing := func() (bool, bool, error) { return false, false, failure }
	err = Wait(ctx, &mu, &s, "cache of pods/v1", "sync", failing)
	want = "kctl: cache of pods/v1 did not sync: pods/v1 is not installed (context canceled)"
	if err == nil || err.Error() != want {
		t.Errorf("failing: Wait = %v, want %q", err, want)
	}
	if !errors.Is(err, failure) || !errors.Is(err, context.Canceled) {
		t.Errorf("failing: Wait = %v, want it to match the failure and ctx's error", err)
	}
	pending := func() (bool, bool, error) { return false, false, nil }
	err = Wait(ctx, &mu, &s, "cache of pods/v1", "sync", pending)
	want = "kctl: cache of pods/v1 did not sync: context canceled"
	if err == nil || err.Error() != want {
		t.Errorf("pending: Wait = %v, want %q", err, want)
	}
}

func TestErr(t *testing.T) {
	failure := errors.New("kctl: forbidden")
	for _, c := range []struct {
		failure                  error
		started, stopped, synced bool
		want                     string
	}{
		{failure, true, false, true, "kctl: forbidden"},
		{nil, false, false, false, "kctl: cache of pods/v1 is not started: start the Cache"},
		{nil, true, true, true, "kctl: cache of pods/v1 is stopped"},
		{nil, true, false, false, "kctl: cache of pods/v1 is still syncing"},
		{nil, true, false, true, ""},
	} {
		err := Err("cache of pods/v1", c.failure, c.started, c.stopped, c.synced)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("Err(%v, %v, %v, %v) = %q, want %q", c.failure, c.started, c.stopped, c.synced, got, c.want)
		}
	}
}
