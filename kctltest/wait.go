package kctltest

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// WaitTimeout bounds WaitFor and Eventually unless a call passes Timeout.
const WaitTimeout = 30 * time.Second

// ConsistentlyFor is how long Consistently watches unless a call passes
// Timeout.
const ConsistentlyFor = 3 * time.Second

// WaitOption changes one wait: see Timeout.
type WaitOption func(*wait)

// Timeout bounds one call of WaitFor or Eventually to d instead of
// WaitTimeout, and makes Consistently watch for d instead of
// ConsistentlyFor:
//
//	kctltest.WaitFor(t, widgets, ns, "hello", ready, kctltest.Timeout(2*time.Minute))
func Timeout(d time.Duration) WaitOption {
	return func(w *wait) { w.timeout = d }
}

// wait is the settings of one wait.
type wait struct {
	timeout time.Duration
}

func waitWith(def time.Duration, opts []WaitOption) wait {
	w := wait{timeout: def}
	for _, o := range opts {
		o(&w)
	}
	return w
}

// Getter is the method of kctl.Client[T] (and FakeClient[T]) that WaitFor calls.
type Getter[T any] interface {
	Get(ctx context.Context, namespace, name string) (*T, error)
}

// WaitFor reads the object namespace/name through c as Eventually calls its check until cond
// holds for it, and returns it. cond gets nil while the object does not
// exist, so waiting for a deletion is
//
//	kctltest.WaitFor(t, widgets, ns, "hello", func(w *Widget) bool { return w == nil })
//
// After WaitTimeout (30 s, or Timeout's) t fails with the last state seen: the object as
// JSON (without managedFields), or the last error. Pass an uncached client
// (kctl.NewClient[T](env.Conn)): a Manager's client shows its cache. A
// FakeClient works too.
func WaitFor[T any](t TB, c Getter[T], namespace, name string, cond func(obj *T) bool, opts ...WaitOption) *T {
	t.Helper()
	var found *T
	what := fmt.Sprintf("%s %s/%s to meet the condition", reflect.TypeFor[T]().Name(), namespace, name)
	Eventually(t, what, func() string {
		obj, err := c.Get(t.Context(), namespace, name)
		if apierrors.IsNotFound(err) {
			obj = nil
			err = nil
		}
		if err == nil && cond(obj) {
			found = obj
			return ""
		}
		return lastSeen(obj, err)
	}, opts...)
	return found
}

// Eventually calls check until it returns "" (the awaited state holds):
// at once, then after 1 ms, then twice as long each time up to every 50 ms
// (a state an in-memory server reaches in a millisecond is seen in one),
// and, with an Env of StartInMemory(t), also soon after its server
// changes (leaving three times check's own time between two calls);
// and after WaitTimeout (30 s, or Timeout's) fails t with what and check's last
// answer, which says what it saw instead:
//
//	kctltest.Eventually(t, "two ReplicaSets labelled", func() string {
//		list, err := rsets.List(ctx, kctl.ListOptions{Namespace: ns, Labels: sel})
//		if err != nil || len(list) != 2 {
//			return fmt.Sprintf("%d ReplicaSets, %v", len(list), err)
//		}
//		return ""
//	})
func Eventually(t TB, what string, check func() (saw string), opts ...WaitOption) {
	t.Helper()
	w := waitWith(WaitTimeout, opts)
	deadline := time.Now().Add(w.timeout)
	every := time.Millisecond
	for {
		changed := changesOf(t) // taken first: a change during check counts
		began := time.Now()
		saw := check()
		if saw == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("kctltest: waited %v for %s; last seen: %s", w.timeout, what, saw)
		}
		if !waitChange(t.Context(), every, max(3*time.Since(began), time.Millisecond), changed) {
			t.Fatalf("kctltest: the test ended while waiting for %s; last seen: %s", what, saw)
		}
		every = min(2*every, 50*time.Millisecond)
	}
}

// waitChange waits for backoff, or, once gap has passed, for changed to
// be closed; it returns false if ctx ends first.
func waitChange(ctx context.Context, backoff, gap time.Duration, changed <-chan struct{}) bool {
	b := time.NewTimer(backoff)
	defer b.Stop()
	g := time.NewTimer(gap)
	defer g.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-b.C:
		return true
	case <-g.C:
	}
	select {
	case <-ctx.Done():
		return false
	case <-b.C:
	case <-changed:
	}
	return true
}

// Consistently calls check every 50 ms for ConsistentlyFor (3 s, or
// Timeout's), and fails t at once, with what and check's answer, the first
// time check does not return "": that nothing happens, or that a state
// holds. The first call is at once, the last at the end of the time.
//
//	kctltest.Consistently(t, "no Job while suspended", func() string {
//		list, err := jobs.List(ctx, kctl.ListOptions{Namespace: ns})
//		if err != nil || len(list) != 0 {
//			return fmt.Sprintf("%d Jobs, %v", len(list), err)
//		}
//		return ""
//	})
func Consistently(t TB, what string, check func() (saw string), opts ...WaitOption) {
	t.Helper()
	w := waitWith(ConsistentlyFor, opts)
	start := time.Now()
	end := start.Add(w.timeout)
	for {
		saw := check()
		if saw != "" {
			t.Fatalf("kctltest: %s stopped holding after %v: %s", what, time.Since(start).Round(time.Millisecond), saw)
		}
		if time.Now().After(end) {
			return
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("kctltest: the test ended while checking that %s", what)
		case <-time.After(min(50*time.Millisecond, time.Until(end)+time.Millisecond)):
		}
	}
}

// lastSeen describes what a Get returned, for a failure message.
func lastSeen[T any](obj *T, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	if obj == nil {
		return "no such object (NotFound)"
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return fmt.Sprintf("%+v", obj)
	}
	var m map[string]any
	if json.Unmarshal(b, &m) == nil {
		if meta, ok := m["metadata"].(map[string]any); ok {
			delete(meta, "managedFields")
		}
		b, _ = json.MarshalIndent(m, "", "  ")
	}
	return "\n" + string(b)
}
