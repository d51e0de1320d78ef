package group

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

func TestGroup_Wait_ReturnsOnceEveryGoroutineHasReturned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(t.Context())
		defer cancel(nil)
		g := New(cancel)
		g.Go("short", nil, func() error { time.Sleep(time.Second); return nil })
		g.Go("shorter", nil, func() error { return nil })
		start := time.Now()
		by := func() time.Time { return start.Add(time.Hour) }
		if running := g.Wait(ctx, by); running != nil || time.Since(start) != time.Second {
			t.Errorf("Wait() = %q after %v, want nil after 1s", running, time.Since(start))
		}
	})
}

func TestGroup_Wait_AfterStop_GivesUpAtByNamingWhatRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stop, cancel := context.WithCancelCause(t.Context())
		g := New(cancel)
		deaf := make(chan struct{})
		defer close(deaf)
		g.Go("deaf", func() string { return "busy" }, func() error { <-deaf; return nil })
		g.Go("plain", nil, func() error { <-deaf; return nil })
		cancel(nil)
		start := time.Now()
		got := g.Wait(stop, func() time.Time { return start.Add(time.Second) })
		want := []string{"deaf (busy)", "plain"}
		if !slices.Equal(got, want) || time.Since(start) != time.Second {
			t.Errorf("Wait() = %q after %v, want %q after 1s", got, time.Since(start), want)
		}
	})
}

func TestGroup_Err_IsTheFirstErrorAndCancels(t *testing.T) {
	ctx, cancel := context.WithCancelCause(t.Context())
	g := New(cancel)
	boom := errors.New("boom")
	g.Go("broken", nil, func() error { return boom })
	<-ctx.Done()
	g.Go("canceled", nil, func() error { return context.Canceled })
	g.Wait(ctx, func() time.Time { return time.Now().Add(time.Minute) })
	if err := g.Err(); !errors.Is(err, boom) {
		t.Errorf("Err() = %v, want boom", err)
	}
	if cause := context.Cause(ctx); !errors.Is(cause, boom) {
		t.Errorf("context.Cause = %v, want boom", cause)
	}
}
