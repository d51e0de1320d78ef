package kctl

// An extra: small helpers a port from controller-runtime reaches for:
// ObjectReferenceOf, a corev1.ObjectReference to a typed object, as
// client-go's reference.GetReference makes with a Scheme; and
// Manager.Enqueue, which reaches a controller by its name.

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// ObjectReferenceOf returns a reference to obj, with apiVersion and kind
// from its Go type (no Scheme), and its namespace, name, UID and
// resourceVersion:
//
//	ref, err := kctl.ObjectReferenceOf(pod) // for an Event, a status field
//
// It fails only if T is not an API type (see ResourceOf).
func ObjectReferenceOf[T any, PT Object[T]](obj *T) (corev1.ObjectReference, error) {
	res, err := ResourceOf[T]()
	if err != nil {
		return corev1.ObjectReference{}, err
	}
	m := PT(obj)
	return corev1.ObjectReference{
		APIVersion:      res.APIVersion(),
		Kind:            res.Kind,
		Namespace:       m.GetNamespace(),
		Name:            m.GetName(),
		UID:             m.GetUID(),
		ResourceVersion: m.GetResourceVersion(),
	}, nil
}

// Enqueue asks the controller named name for a reconcile of k, as its
// Enqueue does, from code that does not hold the controller (e.g. an
// HTTP handler set up elsewhere):
//
//	err := mgr.Enqueue("podcount", kctl.Key{Namespace: "shop", Name: "web"})
//
// It fails, naming the controllers there are, if none is named name.
func (m *Manager) Enqueue(name string, k Key) error {
	m.mu.Lock()
	c, ok := m.byName[name]
	names := slices.Sorted(maps.Keys(m.byName))
	m.mu.Unlock()
	if !ok {
		return fmt.Errorf("kctl: Enqueue(%q, %s): no controller "+
			"of that name; the Manager has %q", name, k, names)
	}
	c.Enqueue(k)
	return nil
}
