package kctl

// An extra: ObjectReferenceOf, a corev1.ObjectReference to a typed object,
// as client-go's reference.GetReference makes with a Scheme.

import (
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
