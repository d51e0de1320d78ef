package shutdown

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

var errLost = errors.New("lost the lease")

// queue is a work queue whose work in flight ends when done is closed.
type queue struct {
	done     chan struct{}
	shutDown bool // ShutDown was called
	drained  bool // ShutDownWithDrain was called
}

func (q *queue) ShutDown() { q.shutDown = true }

func (q *queue) ShutDownWithDrain(ctx context.Context) error {
	q.drained = true
	select {
	case <-q.done:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// drainRun is one Drain: its term ends with cause, and the work in flight
// ends after workFor (never if 0); lose, if > 0, loses the lease then.
type drainRun struct {
	cause   error
	workFor time.Duration
	lose    time.Duration
}

// result is what a Drain did.
type result struct {
	q        *queue
	log      string
	cause    error         // work's cause once Drain returned
	took     time.Duration // from the term's end to Drain's return
	askedDue bool          // drainBy was asked
}

func (r drainRun) do(t *testing.T) result {
	t.Helper()
	var res result
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	lease, loseLease := context.WithCancelCause(context.Background())
	defer loseLease(nil)
	work, stop := context.WithCancelCause(lease)
	term, end := context.WithCancelCause(context.Background())
	end(r.cause)
	res.q = &queue{done: make(chan struct{})}
	if r.workFor > 0 {
		time.AfterFunc(r.workFor, func() { close(res.q.done) })
	}
	if r.lose > 0 {
		time.AfterFunc(r.lose, func() { loseLease(errLost) })
	}
	start := time.Now()
	drainBy := func() (time.Time, time.Duration) {
		res.askedDue = true
		return start.Add(2 * time.Second), 3 * time.Second
	}
	busy := func() string { return "reconciling ns/a (for 5s)" }
	Drain(term, work, stop, res.q, errLost, drainBy, log, busy)
	res.took = time.Since(start)
	res.cause = context.Cause(work)
	res.log = logs.String()
	return res
}

func TestDrain_LeadershipLost_CancelsAtOnceWithItsCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := drainRun{cause: errLost, workFor: time.Second}.do(t)
		if !r.q.shutDown || r.q.drained {
			t.Errorf("ShutDown %v, ShutDownWithDrain %v; want ShutDown only", r.q.shutDown, r.q.drained)
		}
		if r.took != 0 || !errors.Is(r.cause, errLost) {
			t.Errorf("work ended after %v with %v; want at once with the lost lease", r.took, r.cause)
		}
		if r.askedDue {
			t.Error("drainBy was asked: it would fix the shutdown schedule without a shutdown")
		}
		if !strings.Contains(r.log, "leadership lost: cancelling in-flight reconciles") {
			t.Errorf("log %q does not say leadership was lost", r.log)
		}
	})
}

func TestDrain_WorkEndsInTime_NothingCancelledNorLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := drainRun{cause: context.Canceled, workFor: time.Second}.do(t)
		if !r.q.drained || r.q.shutDown {
			t.Errorf("ShutDown %v, ShutDownWithDrain %v; want ShutDownWithDrain only", r.q.shutDown, r.q.drained)
		}
		if r.took != time.Second || !errors.Is(r.cause, context.Canceled) {
			t.Errorf("Drain returned after %v, work's cause %v; want 1s (the work's end), then cancelled", r.took, r.cause)
		}
		if r.log != "" {
			t.Errorf("log %q, want none: nothing was cut short", r.log)
		}
	})
}

func TestDrain_PastDrainBy_CancelsAndNamesTheWorkInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := drainRun{cause: context.Canceled}.do(t)
		if r.took != 2*time.Second || !errors.Is(r.cause, context.Canceled) {
			t.Errorf("Drain returned after %v, work's cause %v; want 2s (drainBy), then cancelled", r.took, r.cause)
		}
		for _, want := range []string{"shutdown timeout nearly passed: cancelling in-flight reconciles", "timeout=3s", `inFlight="reconciling ns/a (for 5s)"`} {
			if !strings.Contains(r.log, want) {
				t.Errorf("log %q does not say %q", r.log, want)
			}
		}
	})
}

func TestDrain_LeaseLostDuringTheDrain_CancelsThenAndSaysSo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := drainRun{cause: context.Canceled, lose: 500 * time.Millisecond}.do(t)
		if r.took != 500*time.Millisecond || !errors.Is(r.cause, errLost) {
			t.Errorf("Drain returned after %v, work's cause %v; want 500ms (the lease lost), with its cause", r.took, r.cause)
		}
		if !strings.Contains(r.log, "leadership lost during shutdown: cancelling in-flight reconciles") || strings.Contains(r.log, "timeout nearly passed") {
			t.Errorf("log %q, want the lease lost during the shutdown only", r.log)
		}
	})
}

func TestBusy_NamesTheWorkInFlightSortedWithHowLong(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		since := map[string]time.Time{"ns/b": now.Add(-time.Second), "ns/a": now.Add(-2500 * time.Millisecond)}
		if got, want := Busy("reconciling", since), "reconciling ns/a (for 2.5s), ns/b (for 1s)"; got != want {
			t.Errorf("Busy = %q, want %q", got, want)
		}
		if got := Busy("reconciling", map[string]time.Time{}); got != "" {
			t.Errorf("Busy of nothing = %q, want \"\"", got)
		}
	})
}
