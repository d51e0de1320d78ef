package kctl

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kctl-dev/kctl/internal/group"
)

func TestGroup_WaitAfterStop_EndsAtDeadlineNamingWhatStillRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stop, cancel := context.WithCancelCause(t.Context())
		g := group.New(cancel)
		deaf := make(chan struct{})
		defer close(deaf)
		runIn(g, stop, Runnable{Name: "polite", Run: func(ctx context.Context) error { <-ctx.Done(); return nil }})
		runIn(g, stop, Runnable{Name: "deaf", Run: func(context.Context) error { <-deaf; return nil },
			Busy: func() string { return "reconciling ns/a" }})
		cancel(nil)
		start := time.Now()
		runIn(g, stop, Runnable{Name: "late", Run: func(context.Context) error { return nil }}) // added while stopping
		got := g.Wait(stop, func() time.Time { return start.Add(time.Second) })
		if want := []string{"deaf (reconciling ns/a)"}; !slices.Equal(got, want) || time.Since(start) != time.Second {
			t.Errorf("g.Wait() = %q after %v, want %q after 1s", got, time.Since(start), want)
		}
	})
}

func TestGroup_FirstError_IsKeptAndCancels(t *testing.T) {
	ctx, cancel := context.WithCancelCause(t.Context())
	g := group.New(cancel)
	runIn(g, ctx, Runnable{Name: "broken", Run: func(context.Context) error { return errors.New("boom") }})
	<-ctx.Done()
	runIn(g, ctx, Runnable{Name: "later", Run: func(context.Context) error { return errors.New("after the cancel: ignored") }})
	if running := g.Wait(ctx, func() time.Time { return time.Now().Add(time.Minute) }); running != nil {
		t.Fatalf("g.Wait() = %q, want nil", running)
	}
	if err := g.Err(); err == nil || !strings.Contains(err.Error(), `runnable "broken" failed: boom`) {
		t.Errorf("g.Err() = %v, want the broken runnable's error", err)
	}
	if cause := context.Cause(ctx); cause == nil || !strings.Contains(cause.Error(), "boom") {
		t.Errorf("context.Cause = %v, want the broken runnable's error", cause)
	}
}
