package group

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// ran records the tasks that ran and the context value each saw.
type ran struct {
	mu  sync.Mutex
	got []string
}

type ctxKey struct{}

func (r *ran) task(name string) Task {
	return Task{Name: name, Run: func(ctx context.Context) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.got = append(r.got, name+"@"+ctx.Value(ctxKey{}).(string))
		return nil
	}}
}

func (r *ran) sorted() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(slices.Values(r.got))
}

func TestPending_RunsTasksAddedBeforeStartAtStartAndLaterOnesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(t.Context())
		defer cancel(nil)
		ctx = context.WithValue(ctx, ctxKey{}, "start")
		var r ran
		var p Pending
		p.Go(r.task("before"))
		synctest.Wait()
		if got := r.sorted(); len(got) != 0 || p.Len() != 1 {
			t.Fatalf("before Start: ran %q with %d waiting, want none ran and 1 waiting", got, p.Len())
		}
		g := New(cancel)
		p.Start(ctx, g)
		p.Go(r.task("after"))
		g.Wait(ctx, time.Now)
		want := []string{"after@start", "before@start"}
		if got := r.sorted(); !slices.Equal(got, want) || p.Len() != 0 {
			t.Errorf("ran %q with %d waiting, want %q and none", got, p.Len(), want)
		}
	})
}

func TestTerms_RunsEveryTaskInEachTermAndNoneBetween(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(t.Context())
		defer cancel(nil)
		var r ran
		var ts Terms
		// a task made for each term from its lease context
		add := func(name string) {
			ts.Add(func(lease context.Context) Task {
				return r.task(name + "/" + lease.Value(ctxKey{}).(string))
			})
		}
		add("a")
		for _, term := range []string{"1", "2"} {
			g := New(cancel)
			leader := context.WithValue(ctx, ctxKey{}, "leader"+term)
			lease := context.WithValue(ctx, ctxKey{}, "lease"+term)
			ts.Begin(g, leader, lease)
			if ts.Current() != g {
				t.Fatalf("term %s: Current() is not the term's group", term)
			}
			if term == "1" {
				add("b") // during the term: runs at once, and in later terms
			}
			g.Wait(ctx, time.Now)
			ts.End()
		}
		add("c") // between terms: waits for the next
		synctest.Wait()
		want := []string{
			"a/lease1@leader1", "a/lease2@leader2",
			"b/lease1@leader1", "b/lease2@leader2",
		}
		if got := r.sorted(); !slices.Equal(got, want) || ts.Current() != nil {
			t.Errorf("ran %q, Current() %v; want %q and nil", got, ts.Current(), want)
		}
	})
}

func TestLast_RunsDetachedFromTheManagerUntilStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(t.Context())
		ctx = context.WithValue(ctx, ctxKey{}, "manager")
		var l Last
		stopped := make(chan string, 2)
		writer := func(name string) Task {
			return Task{Name: name, Run: func(ctx context.Context) error {
				<-ctx.Done()
				stopped <- name + "@" + ctx.Value(ctxKey{}).(string)
				return nil
			}}
		}
		l.Go(writer("before"))
		l.Start(ctx, cancel)
		l.Go(writer("after"))
		cancel(nil) // the Manager's context ends: its writers go on
		synctest.Wait()
		if len(stopped) != 0 {
			t.Fatalf("%d writers stopped with the Manager's context, want none before Stop", len(stopped))
		}
		l.Stop()
		by := func() time.Time { return time.Now().Add(time.Second) }
		if running := l.Wait(ctx, by); running != nil || l.Err() != nil {
			t.Fatalf("Wait() = %q, Err() = %v, want nil and nil", running, l.Err())
		}
		got := []string{<-stopped, <-stopped}
		slices.Sort(got)
		if want := []string{"after@manager", "before@manager"}; !slices.Equal(got, want) {
			t.Errorf("stopped %q, want %q", got, want)
		}
	})
}
