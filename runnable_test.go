package kctl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kctl-dev/kctl/internal/group"
	corev1 "k8s.io/api/core/v1"
)

// runIn runs r in g with ctx, as the Manager does.
func runIn(g *group.Group, ctx context.Context, r Runnable) {
	t := r.task()
	g.Go(t.Name, t.Busy, func() error { return t.Run(ctx) })
}

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

// hangingEvents is an events.Sink whose writes hang until their context ends.
type hangingEvents struct{}

func (hangingEvents) Create(ctx context.Context, _ *corev1.Event) error {
	<-ctx.Done()
	return ctx.Err()
}
func (hangingEvents) Repeat(ctx context.Context, _, _ string, _ int32, _ time.Time) error {
	<-ctx.Done()
	return ctx.Err()
}

func TestEventRecorder_Shutdown_EveryEventNotWrittenIsCountedAndLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _, log := testRecorder()
		r.sink = hangingEvents{}
		for i := range 3 {
			r.Event(eventPod(fmt.Sprint("web-", i), fmt.Sprint("uid-", i)), corev1.EventTypeNormal, "Created", "x")
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel() // shutting down: write what is buffered until flushBy
		start := time.Now()
		r.deliver(ctx, flushIn(time.Second))
		if took := time.Since(start); took != time.Second {
			t.Errorf("deliver returned %v after its ctx ended, want at flushBy (1s)", took)
		}
		r.Event(eventPod("late", "uid-late"), corev1.EventTypeNormal, "Created", "after the writer stopped")
		r.Event(eventPod("later", "uid-later"), corev1.EventTypeNormal, "Created", "after the writer stopped")
		if got := r.dropped.Load(); got != 5 {
			t.Errorf("dropped = %d, want 5 (a write cut off by the deadline, 2 left buffered, 2 after the writer stopped)", got)
		}
		for _, want := range []string{"could not write Event (dropped)", "Events not written in time (dropped)", "recorded after the Manager stopped writing Events"} {
			if n := strings.Count(log.String(), want); n != 1 {
				t.Errorf("the log says %q %d times, want once:\n%s", want, n, log)
			}
		}
	})
}

func TestManager_EventsDropped_OnTheMetricsPage(t *testing.T) {
	mgr, err := NewManager(Options{Config: testUnreachableConfig(), Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	rec := mgr.EventRecorder("c") // never started: the buffer fills
	for i := range eventBuffer + 2 {
		rec.Event(eventPod(fmt.Sprint("web-", i), fmt.Sprint("uid-", i)), corev1.EventTypeNormal, "Created", "x")
	}
	if page := scrapeMetrics(t, mgr.metrics.Handler()); !strings.Contains(page, "\nkctl_events_dropped_total 2\n") {
		t.Errorf("the metrics page does not count 2 dropped Events:\n%s", page)
	}
}
