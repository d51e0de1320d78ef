package kctl

// An extra: owner references that are not the controller one: Owns for
// every owner (OwnsEveryOwner) and SetOwnerReference, as
// controller-runtime's EnqueueRequestForOwner without OnlyControllerOwner
// and controllerutil.SetOwnerReference.

import (
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// OwnsEveryOwner is Owns for every owner reference of C to an object of
// type T, controller or not: a change to a C enqueues each of its owners
// of type T (matched by group and kind, whatever the version).
//
//	kctl.OwnsEveryOwner[corev1.ConfigMap](c) // a ConfigMap shared by several owners
func OwnsEveryOwner[C any, PC Object[C], T any](c *Controller[T], preds ...Predicate) *Controller[T] {
	if c.keysOnly("OwnsEveryOwner") {
		return c
	}
	keys := func(obj *C) []Key { return everyOwnerKey(c.res, metaOf(obj)) }
	return watchSource[C, PC](c, "owned", preds, keys)
}

// everyOwnerKey is the key of each of obj's owners of res (same group and
// kind, any version).
func everyOwnerKey(res Resource, obj metav1.Object) []Key {
	ns := obj.GetNamespace()
	if !res.Namespaced {
		ns = ""
	}
	var keys []Key
	for _, ref := range obj.GetOwnerReferences() {
		if ref.Kind != res.Kind {
			continue
		}
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil || gv.Group != res.Group {
			continue
		}
		keys = append(keys, Key{Namespace: ns, Name: ref.Name})
	}
	return keys
}

// SetOwnerReference makes owner an owner of child, not its controller:
// it adds an owner reference (apiVersion and kind from owner's type), or
// updates the one child has to owner (same UID, or same group, kind and
// name), keeping that one's controller and blockOwnerDeletion. The
// garbage collector deletes child once every owner is gone. It fails,
// changing nothing, if owner has no UID yet (create it first), or if a
// namespaced owner is not in child's namespace.
//
//	err := kctl.SetOwnerReference(team, sharedConfigMap)
func SetOwnerReference[O any, PO Object[O], C any, PC Object[C]](owner *O, child *C) error {
	res, err := ResourceOf[O]()
	if err != nil {
		return err
	}
	om := PO(owner)
	cm := PC(child)
	why := ""
	switch {
	case om.GetUID() == "":
		why = "it has no UID yet; create it first"
	case res.Namespaced && om.GetNamespace() != cm.GetNamespace():
		why = "a namespaced owner must be in its dependent's namespace"
	}
	if why != "" {
		return fmt.Errorf("kctl: cannot make %s %s an owner of %s: %s",
			res.Kind, keyOf(om), keyOf(cm), why)
	}
	ref := metav1.OwnerReference{
		APIVersion: res.APIVersion(),
		Kind:       res.Kind,
		Name:       om.GetName(),
		UID:        om.GetUID(),
	}
	refs := slices.Clone(cm.GetOwnerReferences())
	same := func(r metav1.OwnerReference) bool {
		return r.UID == ref.UID || sameOwner(r, ref)
	}
	i := slices.IndexFunc(refs, same)
	if i < 0 {
		refs = append(refs, ref)
	} else {
		ref.Controller = refs[i].Controller
		ref.BlockOwnerDeletion = refs[i].BlockOwnerDeletion
		refs[i] = ref
	}
	cm.SetOwnerReferences(refs)
	return nil
}

// sameOwner reports whether a and b name one object: the same group,
// kind and name, whatever the version.
func sameOwner(a, b metav1.OwnerReference) bool {
	ga, errA := schema.ParseGroupVersion(a.APIVersion)
	gb, errB := schema.ParseGroupVersion(b.APIVersion)
	if errA != nil || errB != nil {
		return false
	}
	return ga.Group == gb.Group && a.Kind == b.Kind && a.Name == b.Name
}
