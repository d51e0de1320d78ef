package kctl

// A Client's writes: Create, Update, UpdateStatus, Patch and Delete. The
// further verbs (Apply, ApplyConfig, DeleteWithOptions, DeleteAllOf) are on
// floor 2, in client_more.go.

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/kctl-dev/kctl/internal/transport"
)

// Create creates obj (its namespace, name or generateName, and content) and
// updates obj from the server's answer.
func (c *Client[T]) Create(ctx context.Context, obj *T) error {
	return c.write(ctx, "create", http.MethodPost, obj, "")
}

// Update replaces obj on the server and updates obj from the answer; a stale
// resourceVersion fails with Conflict. The server ignores status changes of a
// resource with a status subresource: use UpdateStatus for those.
func (c *Client[T]) Update(ctx context.Context, obj *T) error {
	return c.write(ctx, "update", http.MethodPut, obj, "")
}

// UpdateStatus is Update of the status subresource: only obj's status is
// written, with the same optimistic concurrency.
func (c *Client[T]) UpdateStatus(ctx context.Context, obj *T) error {
	return c.write(ctx, "update status of", http.MethodPut, obj, "status")
}

// write sends obj with method (to its subresource sub, if any) and updates
// obj from the answer: Create, Update and UpdateStatus over P.
func (c *client[P]) write(
	ctx context.Context,
	verb, method string,
	obj P,
	sub string,
) error {
	if c.err != nil {
		return c.err
	}
	body, ct, err := c.codec.encode(obj)
	if err != nil {
		return err
	}
	m := metaOf(obj)
	r := request{
		verb:        verb,
		method:      method,
		namespace:   m.GetNamespace(),
		name:        m.GetName(),
		sub:         sub,
		body:        body,
		contentType: ct,
	}
	out, err := c.object(ctx, r)
	if err == nil {
		c.codec.ops.set(obj, out)
	}
	return err
}

// PatchType is the media type of a patch.
type PatchType string

const (
	// MergePatch: RFC 7386; lists are replaced whole.
	MergePatch PatchType = "application/merge-patch+json"
	// JSONPatch: RFC 6902 operations.
	JSONPatch PatchType = "application/json-patch+json"
	// StrategicMergePatch: k8s.io/api types only.
	StrategicMergePatch PatchType = "application/strategic-merge-patch+json"
	// ApplyPatch: server-side apply; needs a FieldManager.
	ApplyPatch PatchType = "application/apply-patch+yaml"
)

// PatchOptions tunes Patch and Apply. The zero value patches the object
// itself with no field manager.
type PatchOptions struct {
	// FieldManager is who owns the fields set; required by Apply.
	FieldManager string
	// Force, for Apply only: take fields owned by other managers instead
	// of failing with Conflict.
	Force bool
	// Subresource is e.g. "status"; "" patches the object.
	Subresource string
}

// Patch applies data, a patch of type typ, to the object named by obj's
// namespace and name (the rest of obj is not sent), and updates obj from the
// server's answer, as every write that takes an object does.
//
//	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "settings"}}
//	err := configMaps.Patch(ctx, cm, kctl.MergePatch, []byte(`{"data":{"mode":"fast"}}`), kctl.PatchOptions{})
func (c *Client[T]) Patch(
	ctx context.Context,
	obj *T,
	typ PatchType,
	data []byte,
	opts PatchOptions,
) error {
	return c.patchObject(ctx, obj, typ, data, opts)
}

// patchObject is Patch, over P.
func (c *client[P]) patchObject(
	ctx context.Context,
	obj P,
	typ PatchType,
	data []byte,
	opts PatchOptions,
) error {
	m := metaOf(obj)
	out, err := c.patch(
		ctx, m.GetNamespace(), m.GetName(), typ, data, opts)
	if err != nil {
		return err
	}
	c.codec.ops.set(obj, out)
	return nil
}

// patch is Patch of the object namespace/name, returning the answer.
func (c *client[P]) patch(
	ctx context.Context,
	namespace, name string,
	typ PatchType,
	data []byte,
	opts PatchOptions,
) (P, error) {
	// none is the nil P of an error.
	var none P
	r := request{
		verb:        "patch",
		method:      http.MethodPatch,
		namespace:   namespace,
		name:        name,
		sub:         opts.Subresource,
		query:       url.Values{},
		body:        data,
		contentType: string(typ),
	}
	switch {
	case typ == StrategicMergePatch && !c.codec.builtin:
		return none, fmt.Errorf("kctl: patch %s: "+
			"strategic merge patch works only for k8s.io/api types; "+
			"use a merge patch, a JSON patch or Apply", c.what(r))
	case typ == ApplyPatch && opts.FieldManager == "":
		return none, fmt.Errorf("kctl: apply %s: "+
			"server-side apply needs PatchOptions.FieldManager, "+
			"e.g. the controller's name", c.what(r))
	case typ == ApplyPatch && opts.Force:
		r.query.Set("force", "true")
	}
	if typ == ApplyPatch {
		r.verb = "apply"
	}
	if opts.FieldManager != "" {
		r.query.Set("fieldManager", opts.FieldManager)
	}
	return c.object(ctx, r)
}

// Delete deletes the object namespace/name; a missing object is NotFound.
// An object with finalizers is only marked for deletion. DeleteWithOptions
// adds preconditions and a propagation policy.
func (c *Client[T]) Delete(ctx context.Context, namespace, name string) error {
	return c.delete(ctx, namespace, name, nil)
}

// delete deletes the object namespace/name, sending body, a DeleteOptions
// (nil: none, the server's defaults). notes hears of the deletion, or of
// the object as the server answered it.
func (c *client[P]) delete(
	ctx context.Context,
	namespace, name string,
	body []byte,
) error {
	r := request{
		verb:      "delete",
		method:    http.MethodDelete,
		namespace: namespace,
		name:      name,
		body:      body,
	}
	if body != nil {
		r.contentType = mediaJSON
	}
	return c.call(ctx, r, func(ct string, body []byte) error {
		st, isStatus := transport.DecodeStatus(ct, body)
		switch {
		case c.notes == nil:
			// no one to tell
		case isStatus && st.Details != nil:
			// deleted
			c.notes.recordDelete(c.res, namespace, name, st.Details.UID)
		case !isStatus:
			// marked for deletion, or deleted and answered with its
			// last state
			obj, err := c.codec.decode(ct, body)
			if err == nil {
				c.notes.record(c.res, metaOf(obj))
			}
		}
		return nil
	})
}
