package kctl

// An extra: write helpers over a Client (CreateOrUpdate, CreateOrPatch,
// SetControllerReference, RetryOnConflict), as controllerutil's, over
// ObjectClient (client_more.go), the part of a Client they use; owner
// references that are not the controller one (OwnsEveryOwner,
// SetOwnerReference, as controller-runtime's EnqueueRequestForOwner
// without OnlyControllerOwner and controllerutil.SetOwnerReference); and
// the small helpers a port from controller-runtime reaches for
// (ObjectReferenceOf, as client-go's reference.GetReference makes with a
// Scheme; Manager.Enqueue, which reaches a controller by its name).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"time"

	"github.com/kctl-dev/kctl/internal/jsonpatch"
	"github.com/kctl-dev/kctl/internal/objcopy"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// SetControllerReference makes owner the controller of child, adding or
// updating child's owner reference (controller and blockOwnerDeletion set,
// apiVersion and kind from owner's type). It fails, changing nothing, if child
// has another controller, if owner has no UID yet (create it first), or if a
// namespaced owner is not in child's namespace.
//
//	err := kctl.SetControllerReference(deployment, replicaSet)
func SetControllerReference[O any, PO Object[O], C any, PC Object[C]](
	owner *O,
	child *C,
) error {
	res, err := ResourceOf[O]()
	if err != nil {
		return err
	}
	om := PO(owner)
	cm := PC(child)
	current := metav1.GetControllerOfNoCopy(cm)
	elsewhere := om.GetNamespace() != cm.GetNamespace()
	why := ""
	switch {
	case om.GetUID() == "":
		why = "it has no UID yet; create it first"
	case res.Namespaced && elsewhere:
		why = "a namespaced owner must be in its dependent's namespace"
	case current != nil && current.UID != om.GetUID():
		why = fmt.Sprintf("it is already controlled by %s %s (uid %s)",
			current.Kind, current.Name, current.UID)
	}
	if why != "" {
		return fmt.Errorf("kctl: cannot make %s %s the controller of %s: %s",
			res.Kind, keyOf(om), keyOf(cm), why)
	}
	refs := slices.Clone(cm.GetOwnerReferences())
	isOwner := func(r metav1.OwnerReference) bool {
		return r.UID == om.GetUID()
	}
	i := slices.IndexFunc(refs, isOwner)
	if i < 0 {
		i = len(refs)
		refs = append(refs, metav1.OwnerReference{})
	}
	gvk := schema.GroupVersionKind{
		Group:   res.Group,
		Version: res.Version,
		Kind:    res.Kind,
	}
	refs[i] = *metav1.NewControllerRef(om, gvk)
	cm.SetOwnerReferences(refs)
	return nil
}

// RetryOnConflict calls fn, which must read the object afresh, until it returns
// no Conflict, at most 5 times, waiting about 10, 20, 40, 80ms between tries.
// It returns fn's last error, or ctx's error if ctx ends while waiting.
func RetryOnConflict(ctx context.Context, fn func() error) error {
	wait := 10 * time.Millisecond
	for try := 1; ; try++ {
		err := fn()
		if !apierrors.IsConflict(err) || try == 5 {
			return err
		}
		jitter := rand.N(wait/10 + 1)
		select {
		case <-ctx.Done():
			return fmt.Errorf("kctl: retrying on conflict: %w (last: %w)",
				ctx.Err(), unprefixed(err))
		case <-time.After(wait + jitter):
		}
		wait *= 2
	}
}

// OperationResult says what CreateOrUpdate or CreateOrPatch did.
type OperationResult string

const (
	OperationResultNone    OperationResult = "unchanged"
	OperationResultCreated OperationResult = "created"
	OperationResultUpdated OperationResult = "updated"
	// Only CreateOrPatch returns these two.
	OperationResultUpdatedStatus     OperationResult = "updated with status"
	OperationResultUpdatedStatusOnly OperationResult = "updated status only"
)

// CreateOrUpdate reads the object named by obj's namespace and name into obj,
// calls mutate(obj), which must keep them, then creates it if it did not exist
// or, if mutate changed it, writes the change.
//
//	op, err := kctl.CreateOrUpdate(ctx, configMaps, cm, func(cm *corev1.ConfigMap) error { cm.Data = want; return nil })
//
// The change is a JSON merge patch of just the fields mutate changed,
// carrying the resourceVersion read: a stale read fails with Conflict (wrap
// the call in RetryOnConflict), and a field the read did not return (a cache
// transform dropped it, see TransformFor) is never erased. A list that mutate
// changes is written whole, as a merge patch replaces lists. Status changes
// are sent too, which the server ignores for a resource with a status
// subresource: only CreateOrPatch writes status through the subresource.
// obj becomes the server's answer. RBAC: it needs get, create and patch.
func CreateOrUpdate[T any](
	ctx context.Context,
	c ObjectClient[T],
	obj *T,
	mutate func(*T) error,
) (OperationResult, error) {
	before, res, err := createOrGet(ctx, c, obj, mutate)
	unchanged := before == nil ||
		equality.Semantic.DeepEqual(before, obj)
	if unchanged {
		return res, err
	}
	patch, err := jsonpatch.MergePatch(before, obj)
	if err != nil {
		return OperationResultNone, fmt.Errorf("kctl: update %s %s: %w",
			kindOf[T](), keyOf(metaOf(obj)), err)
	}
	meta, _ := patch["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		patch["metadata"] = meta
	}
	// optimistic concurrency: Conflict if stale
	meta["resourceVersion"] = metaOf(before).GetResourceVersion()
	data, _ := json.Marshal(patch) // decoded from JSON just before
	err = c.Patch(ctx, obj, MergePatch, data, PatchOptions{})
	if err != nil {
		return OperationResultNone, err
	}
	return OperationResultUpdated, nil
}

// CreateOrPatch is CreateOrUpdate writing the change as a JSON merge patch
// (no optimistic concurrency: the fields mutate changed win), a changed
// status through the status subresource.
func CreateOrPatch[T any](
	ctx context.Context,
	c ObjectClient[T],
	obj *T,
	mutate func(*T) error,
) (OperationResult, error) {
	before, res, err := createOrGet(ctx, c, obj, mutate)
	if before == nil {
		return res, err
	}
	change, err := jsonpatch.MergePatch(before, obj)
	if err != nil {
		return res, fmt.Errorf("kctl: patch %s %s: %w",
			kindOf[T](), keyOf(metaOf(obj)), err)
	}
	// the object's change, then its status's
	parts := [2]map[string]any{change}
	if status, ok := parts[0]["status"]; ok {
		delete(parts[0], "status")
		parts[1] = map[string]any{"status": status}
	}
	// Part i is sent to subresources[i]; once sent, the result is results[i].
	subresources := [2]string{"", "status"}
	results := [2]OperationResult{
		OperationResultUpdated,
		OperationResultUpdatedStatusOnly,
	}
	for i, p := range parts {
		if len(p) == 0 {
			continue
		}
		data, _ := json.Marshal(p) // decoded from JSON just before
		opts := PatchOptions{Subresource: subresources[i]}
		err = c.Patch(ctx, obj, MergePatch, data, opts)
		if err != nil {
			return res, err
		}
		res = results[i]
	}
	if res == OperationResultUpdatedStatusOnly && len(parts[0]) > 0 {
		res = OperationResultUpdatedStatus
	}
	return res, nil
}

// createOrGet reads obj, applies mutate and creates obj if it did not exist.
// It returns the object as read if the caller must write a change, else nil.
func createOrGet[T any](
	ctx context.Context,
	c ObjectClient[T],
	obj *T,
	mutate func(*T) error,
) (*T, OperationResult, error) {
	ns := metaOf(obj).GetNamespace()
	name := metaOf(obj).GetName()
	cur, err := c.Get(ctx, ns, name)
	var before *T
	switch {
	case err == nil:
		*obj = *cur
		before = objcopy.Deep(cur, func() *T { return new(T) })
	case !apierrors.IsNotFound(err) || errors.Is(err, ErrNotInstalled):
		return nil, OperationResultNone, err
	}
	err = mutate(obj)
	if err != nil {
		return nil, OperationResultNone, err
	}
	m := metaOf(obj)
	renamed := m.GetNamespace() != ns || m.GetName() != name
	if renamed {
		err = fmt.Errorf("kctl: the mutate function changed %s into %s: "+
			"it must keep the name and namespace",
			nsKey(ns, name), keyOf(m))
		return nil, OperationResultNone, err
	}
	if before != nil {
		return before, OperationResultNone, nil
	}
	err = c.Create(ctx, obj)
	if err != nil {
		return nil, OperationResultNone, err
	}
	return nil, OperationResultCreated, nil
}

// kindOf names T's resource in an error, or T when it has none.
func kindOf[T any]() string {
	res, err := ResourceOf[T]()
	if err != nil {
		return reflect.TypeFor[T]().Name()
	}
	return res.String()
}

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
