package kctl

// A Client's writes: Create, Update, UpdateStatus, Patch, Apply, Delete,
// DeleteWithOptions and DeleteAllOf, with their options.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Create creates obj (its namespace, name or generateName, and content) and
// updates obj from the server's answer.
func (c *client[P]) Create(ctx context.Context, obj P) error {
	return c.write(ctx, "create", http.MethodPost, obj, "")
}

// Update replaces obj on the server and updates obj from the answer; a stale
// resourceVersion fails with Conflict. The server ignores status changes of a
// resource with a status subresource: use UpdateStatus for those.
func (c *client[P]) Update(ctx context.Context, obj P) error {
	return c.write(ctx, "update", http.MethodPut, obj, "")
}

// UpdateStatus is Update of the status subresource: only obj's status is
// written, with the same optimistic concurrency.
func (c *client[P]) UpdateStatus(ctx context.Context, obj P) error {
	return c.write(ctx, "update status of", http.MethodPut, obj, "status")
}

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
func (c *client[P]) Patch(
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

// Apply is server-side apply of obj as the field manager opts.FieldManager,
// sent as JSON; obj is updated from the answer. obj should hold only the
// fields this manager owns: a typed struct also sends its non-omitempty zero
// values (e.g. "creationTimestamp": null), which the server ignores.
func (c *client[P]) Apply(ctx context.Context, obj P, opts PatchOptions) error {
	js := c.codec
	js.proto = false
	data, _, err := js.encode(obj)
	if err != nil {
		return err
	}
	return c.Patch(ctx, obj, ApplyPatch, data, opts)
}

// ApplyConfig is server-side apply of config, a client-go apply
// configuration or any value that marshals to the JSON of the object's
// fields this manager owns, as the field manager opts.FieldManager; it
// returns the object as the server answered. Unlike Apply's typed struct,
// config sends only the fields it sets:
//
//	cm := corev1ac.ConfigMap("settings", "default").WithData(map[string]string{"mode": "fast"})
//	got, err := configMaps.ApplyConfig(ctx, cm, kctl.PatchOptions{FieldManager: "my-controller"})
//
// config must name the object (metadata.name, and metadata.namespace if
// T is namespaced); apiVersion and kind are set from T when it leaves
// them out, and must be T's when it does not.
func (c *client[P]) ApplyConfig(
	ctx context.Context,
	config any,
	opts PatchOptions,
) (P, error) {
	// none is the nil P of an error.
	var none P
	data, err := json.Marshal(config)
	if err != nil {
		return none, fmt.Errorf("kctl: apply %s: encoding the "+
			"apply configuration %T: %w", c.res, config, err)
	}
	var fields map[string]json.RawMessage
	err = json.Unmarshal(data, &fields)
	if err != nil || fields == nil {
		return none, fmt.Errorf("kctl: apply %s: the apply "+
			"configuration %T is not a JSON object", c.res, config)
	}
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	err = json.Unmarshal(data, &head)
	if err != nil {
		return none, fmt.Errorf("kctl: apply %s: reading the "+
			"apply configuration: %w", c.res, err)
	}
	apiVersion := c.res.APIVersion()
	wrongVersion := head.APIVersion != "" &&
		head.APIVersion != apiVersion
	wrongKind := head.Kind != "" && head.Kind != c.res.Kind
	if wrongVersion || wrongKind {
		return none, fmt.Errorf("kctl: apply %s: the apply "+
			"configuration is of %s %s: apply it with a "+
			"client of that type", c.res,
			head.APIVersion, head.Kind)
	}
	if head.APIVersion == "" {
		fields["apiVersion"], _ = json.Marshal(apiVersion)
	}
	if head.Kind == "" {
		fields["kind"], _ = json.Marshal(c.res.Kind)
	}
	body, err := json.Marshal(fields)
	if err != nil {
		return none, err
	}
	ns := head.Metadata.Namespace
	name := head.Metadata.Name
	return c.patch(ctx, ns, name, ApplyPatch, body, opts)
}

// DeleteOptions tunes DeleteWithOptions and DeleteAllOf. The zero value is an
// unconditional delete with the server's default propagation.
type DeleteOptions struct {
	// UID is a precondition: Conflict if the object is no longer this
	// one.
	UID types.UID
	// ResourceVersion is a precondition: Conflict if the object has
	// changed since.
	ResourceVersion string
	// Propagation to dependents: Background, Foreground or Orphan; "":
	// the server's default.
	Propagation metav1.DeletionPropagation
	// GracePeriodSeconds overrides the object's grace period (0: now).
	GracePeriodSeconds *int64
}

func (o DeleteOptions) body() []byte {
	do := metav1.DeleteOptions{
		TypeMeta: metav1.TypeMeta{
			APIVersion: "v1",
			Kind:       "DeleteOptions",
		},
		GracePeriodSeconds: o.GracePeriodSeconds,
		PropagationPolicy:  nonEmpty(o.Propagation),
	}
	if o.UID != "" || o.ResourceVersion != "" {
		do.Preconditions = &metav1.Preconditions{
			UID:             nonEmpty(o.UID),
			ResourceVersion: nonEmpty(o.ResourceVersion),
		}
	}
	// cannot fail: plain strings and numbers
	b, _ := json.Marshal(do)
	return b
}

func nonEmpty[S ~string](s S) *S {
	if s == "" {
		return nil
	}
	return &s
}

// Delete deletes the object namespace/name; a missing object is NotFound.
// It is DeleteWithOptions with the zero DeleteOptions.
func (c *client[P]) Delete(ctx context.Context, namespace, name string) error {
	return c.DeleteWithOptions(ctx, namespace, name, DeleteOptions{})
}

// DeleteWithOptions deletes the object namespace/name with preconditions and
// a propagation policy. An object with finalizers is only marked for deletion.
func (c *client[P]) DeleteWithOptions(
	ctx context.Context,
	namespace, name string,
	opts DeleteOptions,
) error {
	r := request{
		verb:        "delete",
		method:      http.MethodDelete,
		namespace:   namespace,
		name:        name,
		body:        opts.body(),
		contentType: mediaJSON,
	}
	return c.call(ctx, r, func(ct string, body []byte) error {
		st, isStatus := decodeStatus(ct, body)
		switch {
		case isStatus && c.afterDelete != nil && st.Details != nil:
			// deleted
			c.afterDelete(namespace, name, st.Details.UID)
		case !isStatus && c.afterWrite != nil:
			// marked for deletion, or deleted and answered with its
			// last state
			obj, err := c.codec.decode(ct, body)
			if err == nil {
				c.afterWrite(metaOf(obj))
			}
		}
		return nil
	})
}

// DeleteAllOf deletes every object matching opts in one request
// (deletecollection). For a namespaced resource opts.Namespace is required.
func (c *client[P]) DeleteAllOf(
	ctx context.Context,
	opts ListOptions,
	del DeleteOptions,
) error {
	r := request{
		verb:        "delete all of",
		method:      http.MethodDelete,
		namespace:   opts.Namespace,
		list:        true,
		query:       opts.query(),
		body:        del.body(),
		contentType: mediaJSON,
	}
	return c.call(ctx, r, func(string, []byte) error { return nil })
}
