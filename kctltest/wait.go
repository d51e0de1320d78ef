package kctltest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/kctl-dev/kctl"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// WaitTimeout bounds WaitFor.
const WaitTimeout = 30 * time.Second

// WaitFor reads the object namespace/name through c every 50 ms until cond
// holds for it, and returns it. cond gets nil while the object does not
// exist, so waiting for a deletion is
//
//	kctltest.WaitFor(t, widgets, ns, "hello", func(w *Widget) bool { return w == nil })
//
// After WaitTimeout (30 s) t fails with the last state seen: the object as
// JSON (without managedFields), or the last error. Pass an uncached client
// (kctl.NewClient[T](env.Conn)): a Manager's client shows its cache.
func WaitFor[T any](t testing.TB, c *kctl.Client[T], namespace, name string, cond func(obj *T) bool) *T {
	t.Helper()
	deadline := time.Now().Add(WaitTimeout)
	for {
		obj, err := c.Get(t.Context(), namespace, name)
		if apierrors.IsNotFound(err) {
			obj = nil
			err = nil
		}
		if err == nil && cond(obj) {
			return obj
		}
		if time.Now().After(deadline) {
			t.Fatalf("kctltest: WaitFor %s %s/%s: the condition does not hold after %v; last seen: %s",
				c.Resource().Kind, namespace, name, WaitTimeout, lastSeen(obj, err))
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("kctltest: WaitFor %s %s/%s: the test ended", c.Resource().Kind, namespace, name)
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
