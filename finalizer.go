package kctl

// An extra: Finalizer, which makes deletion wait for a controller's
// cleanup, a step of the Controller's reconcile chain; AddFinalizer and
// RemoveFinalizer, the same writes for a reconcile that handles its
// finalizer itself.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Finalizer makes deletion wait for cleanup. kctl adds the finalizer name to
// every object before its first reconcile; when the object is being deleted
// it calls cleanup instead of reconcile and removes the finalizer once cleanup
// returns nil. An error from cleanup is retried with backoff.
//
// kctl writes only the finalizer: adding or removing it is a JSON merge
// patch of metadata.finalizers that carries the resourceVersion of the
// object it started from, so the server refuses it with Conflict (retried
// quietly, see Controller) if the object has changed since, and it never
// writes a field the cache dropped (TransformFor) back as empty. RBAC: the
// controller needs the patch verb on T's resource (not update).
func (c *Controller[T]) Finalizer(
	name string,
	cleanup func(ctx context.Context, obj *T) error,
) *Controller[T] {
	f := &finalizer[T]{c: c, name: name, cleanup: cleanup}
	step := middleware[*T]{name: "Finalizer", rank: rankObject, wrap: f.around}
	return c.configure("Finalizer", func() { c.use(step) })
}

// finalizer handles a controller's finalizer around its reconcile
// function: a step of its reconcile chain (controller.go's middleware).
type finalizer[T any] struct {
	c       *Controller[T]
	name    string
	cleanup func(ctx context.Context, obj *T) error
}

// around is the finalizer's step: it runs reconcile in place of next
// when k's object is cached.
func (f *finalizer[T]) around(next reconcileFunc[*T]) reconcileFunc[*T] {
	return func(ctx context.Context, k Key, obj *T) (Result, error) {
		if obj == nil {
			return next(ctx, k, obj)
		}
		return f.reconcile(ctx, k, obj, next)
	}
}

// reconcile runs in place of next, the rest of the chain, of a
// controller with a finalizer: obj is its copy of the cached object.
func (f *finalizer[T]) reconcile(
	ctx context.Context,
	k Key,
	obj *T,
	next reconcileFunc[*T],
) (Result, error) {
	c := f.c
	m := metaOf(obj)
	has := slices.Contains(m.GetFinalizers(), f.name)
	deleting := m.GetDeletionTimestamp() != nil
	switch {
	case deleting && !has:
		return Result{}, nil // being deleted, our cleanup is done
	case deleting:
		err := f.cleanup(ctx, obj)
		if err != nil {
			return Result{}, fmt.Errorf(
				"kctl: cleanup for finalizer %s failed: %w",
				f.name, unprefixed(err))
		}
		ours := func(s string) bool { return s == f.name }
		list := slices.Clone(m.GetFinalizers())
		rest := slices.DeleteFunc(list, ours)
		err = c.patchFinalizers(ctx, obj, rest)
		if err != nil && !apierrors.IsNotFound(err) {
			return Result{}, fmt.Errorf("kctl: removing finalizer %s: %w",
				f.name, unprefixed(err))
		}
		return Result{}, nil // removed, or the object is already gone
	case !has:
		list := slices.Clone(m.GetFinalizers())
		list = append(list, f.name)
		err := c.patchFinalizers(ctx, obj, list)
		if apierrors.IsNotFound(err) {
			return Result{}, nil // deleted meanwhile: nothing to finalize
		}
		if err != nil {
			return Result{}, fmt.Errorf("kctl: adding finalizer %s: %w",
				f.name, unprefixed(err))
		}
	}
	return next(ctx, k, obj)
}

// patchFinalizers sets obj's finalizers to list on the server, and nothing
// else: a JSON merge patch of metadata.finalizers (a merge patch replaces a
// list whole) that carries obj's resourceVersion, so that the server answers
// Conflict if the object changed since obj was read. On success obj becomes
// the server's answer, readied as the cache readies its objects.
func (c *Controller[T]) patchFinalizers(
	ctx context.Context,
	obj *T,
	list []string,
) error {
	data, err := finalizerPatch(obj, list)
	if err != nil {
		return err
	}
	m := metaOf(obj)
	ns := m.GetNamespace()
	name := m.GetName()
	out, err := c.client.patch(ctx, ns, name,
		MergePatch, data, PatchOptions{})
	if err != nil {
		return err
	}
	c.informer.transform(out)
	*obj = *out
	return nil
}

// AddFinalizer adds name to obj's finalizers on the server unless obj has
// it, and reports whether it wrote. It writes as Finalizer does: a JSON
// merge patch of metadata.finalizers alone carrying obj's resourceVersion
// (Conflict if obj is stale), and obj becomes the server's answer. c may be
// a *Client[T] or anything with its methods (ObjectClient), such as
// kctltest's FakeClient.
//
//	if _, err := kctl.AddFinalizer(ctx, widgets, w, "example.com/cleanup"); err != nil {
//		return kctl.Result{}, err
//	}
func AddFinalizer[T any](
	ctx context.Context,
	c ObjectClient[T],
	obj *T,
	name string,
) (bool, error) {
	list := metaOf(obj).GetFinalizers()
	if slices.Contains(list, name) {
		return false, nil
	}
	list = append(slices.Clone(list), name)
	err := setFinalizers(ctx, c, obj, list)
	if err != nil {
		return false, fmt.Errorf("kctl: adding finalizer %s: %w",
			name, unprefixed(err))
	}
	return true, nil
}

// RemoveFinalizer removes name from obj's finalizers on the server if obj
// has it, and reports whether it wrote; see AddFinalizer. Once the last
// finalizer of an object being deleted is removed, the object is gone.
func RemoveFinalizer[T any](
	ctx context.Context,
	c ObjectClient[T],
	obj *T,
	name string,
) (bool, error) {
	list := metaOf(obj).GetFinalizers()
	if !slices.Contains(list, name) {
		return false, nil
	}
	ours := func(s string) bool { return s == name }
	rest := slices.DeleteFunc(slices.Clone(list), ours)
	err := setFinalizers(ctx, c, obj, rest)
	if err != nil {
		return false, fmt.Errorf("kctl: removing finalizer %s: %w",
			name, unprefixed(err))
	}
	return true, nil
}

// finalizerPatch is the JSON merge patch that sets obj's finalizers to
// list and carries obj's resourceVersion.
func finalizerPatch[T any](obj *T, list []string) ([]byte, error) {
	m := metaOf(obj)
	// [] rather than null: the same on the server, clearer in audit logs
	finalizers := append([]string{}, list...)
	patch := map[string]any{
		"metadata": map[string]any{
			"resourceVersion": m.GetResourceVersion(),
			"finalizers":      finalizers,
		},
	}
	data, err := json.Marshal(patch)
	if err != nil {
		return nil, fmt.Errorf("kctl: encoding a finalizer patch: %w", err)
	}
	return data, nil
}

// setFinalizers is patchFinalizers through an ObjectClient.
func setFinalizers[T any](
	ctx context.Context,
	c ObjectClient[T],
	obj *T,
	list []string,
) error {
	data, err := finalizerPatch(obj, list)
	if err != nil {
		return err
	}
	return c.Patch(ctx, obj, MergePatch, data, PatchOptions{})
}
