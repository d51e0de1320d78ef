package kctltest

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// WaitTimeout bounds WaitFor and Eventually.
const WaitTimeout = 30 * time.Second

// Getter is the method of kctl.Client[T] (and FakeClient[T]) that WaitFor calls.
type Getter[T any] interface {
	Get(ctx context.Context, namespace, name string) (*T, error)
}

// WaitFor reads the object namespace/name through c every 50 ms until cond
// holds for it, and returns it. cond gets nil while the object does not
// exist, so waiting for a deletion is
//
//	kctltest.WaitFor(t, widgets, ns, "hello", func(w *Widget) bool { return w == nil })
//
// After WaitTimeout (30 s) t fails with the last state seen: the object as
// JSON (without managedFields), or the last error. Pass an uncached client
// (kctl.NewClient[T](env.Conn)): a Manager's client shows its cache. A
// FakeClient works too.
func WaitFor[T any](t testing.TB, c Getter[T], namespace, name string, cond func(obj *T) bool) *T {
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
	})
	return found
}

// Eventually calls check every 50 ms until it returns "" (the awaited state
// holds), and after WaitTimeout (30 s) fails t with what and check's last
// answer, which says what it saw instead:
//
//	kctltest.Eventually(t, "two ReplicaSets labelled", func() string {
//		list, err := rsets.List(ctx, kctl.ListOptions{Namespace: ns, Labels: sel})
//		if err != nil || len(list) != 2 {
//			return fmt.Sprintf("%d ReplicaSets, %v", len(list), err)
//		}
//		return ""
//	})
func Eventually(t testing.TB, what string, check func() (saw string)) {
	t.Helper()
	deadline := time.Now().Add(WaitTimeout)
	for {
		saw := check()
		if saw == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("kctltest: waited %v for %s; last seen: %s", WaitTimeout, what, saw)
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("kctltest: the test ended while waiting for %s; last seen: %s", what, saw)
		case <-time.After(50 * time.Millisecond):
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
