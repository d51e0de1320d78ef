package kctl

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
)

// offlineManager is a Manager whose connection goes nowhere: for tests that
// drive a controller's handlers by hand and never start it.
func offlineManager(t testing.TB) *Manager {
	t.Helper()
	m, err := NewManager(Options{Config: &rest.Config{Host: "http://127.0.0.1:1"}})
	if err != nil {
		t.Fatalf("NewManager: %v", err)
	}
	return m
}

// Issue 15 item 11: keys queued by a periodic resync went at normal priority,
// ahead of the live changes that came after them.
func TestController_ResyncKeys_QueueBehindLiveChanges(t *testing.T) {
	m := offlineManager(t)
	c := NewController(m, "resync", func(context.Context, *corev1.ConfigMap) (Result, error) { return Result{}, nil })
	q := NewQueue(QueueOptions[Key]{})
	c.queue = q // as run does, without starting the controller
	cm := func(name string) *corev1.ConfigMap { return storeCM("ns", name, "1", nil) }
	resync := func(name string) {
		obj := cm(name)
		c.onEvent(event[*corev1.ConfigMap]{Type: Updated, Object: obj, Old: obj, Resync: true})
	}
	resync("resync-a")
	resync("resync-b")
	c.onEvent(event[*corev1.ConfigMap]{Type: Updated, Object: cm("live"), Old: storeCM("ns", "live", "0", nil)})
	c.onEvent(event[*corev1.ConfigMap]{Type: Added, Object: cm("created")})

	want := []string{"ns/live", "ns/created", "ns/resync-a", "ns/resync-b"}
	for step, w := range want {
		k, shutdown := q.Get()
		if shutdown || k.String() != w {
			t.Fatalf("step %d: q.Get() = %v, %v; want %s (resync keys go behind live changes)", step, k, shutdown, w)
		}
		q.Done(k)
	}
}

// The same for the keys a Watches source maps a resync to: an unchanged
// object's old keys are not queued again at normal priority.
func TestController_ResyncOfAWatchedType_QueuesBehindLiveChanges(t *testing.T) {
	m := offlineManager(t)
	c := NewController(m, "resync", func(context.Context, *corev1.ConfigMap) (Result, error) { return Result{}, nil })
	secrets, err := InformerFor[corev1.Secret](m.cache)
	if err != nil {
		t.Fatal(err)
	}
	Watches(c, func(s *corev1.Secret) []Key { return []Key{{s.Namespace, "from-" + s.Name}} })
	secrets.mu.Lock()
	before := len(secrets.handlers)
	secrets.mu.Unlock()
	for _, connect := range c.connects { // what the controller's first run does
		connect()
	}
	secrets.mu.Lock()
	handlers := secrets.handlers[before:]
	secrets.mu.Unlock()
	if len(handlers) != 1 {
		t.Fatalf("Watches added %d handlers to the Secret informer, want 1", len(handlers))
	}
	q := NewQueue(QueueOptions[Key]{})
	c.queue = q
	s := &corev1.Secret{}
	s.Namespace, s.Name, s.ResourceVersion = "ns", "resynced", "1"
	handlers[0].fn(event[*corev1.Secret]{Type: Updated, Object: s, Old: s, Resync: true})
	c.onEvent(event[*corev1.ConfigMap]{Type: Added, Object: storeCM("ns", "live", "1", nil)})

	want := []string{"ns/live", "ns/from-resynced"}
	for step, w := range want {
		k, shutdown := q.Get()
		if shutdown || k.String() != w {
			t.Fatalf("step %d: q.Get() = %v, %v; want %s (resync keys go behind live changes)", step, k, shutdown, w)
		}
		q.Done(k)
	}
}
