package kctl

// Floor 2, a Client's further verbs, each a request of floor 1's
// (client.go): Patch, a patch of one of four types (PatchType) to an
// object; Apply and ApplyConfig, server-side apply as a Patch of type
// ApplyPatch; DeleteWithOptions, a Delete with preconditions, propagation
// and a grace period; DeleteAllOf, one deletecollection request;
// ObjectClient, the part of a Client the helpers and Finalizer use;
// Uncached, a handle that reads the server; Declare, a user's own type's
// Resource, which floor 1 reads through ResourceOf; and LoadConfig, the
// configuration a Conn of your own is made from (a Manager searches the
// same way itself, internal/clusterconfig).

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"

	"github.com/kctl-dev/kctl/internal/apitype"
	"github.com/kctl-dev/kctl/internal/clusterconfig"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

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

// Apply is server-side apply of obj as the field manager opts.FieldManager,
// sent as JSON; obj is updated from the answer. obj should hold only the
// fields this manager owns: a typed struct also sends its non-omitempty zero
// values (e.g. "creationTimestamp": null), which the server ignores.
func (c *Client[T]) Apply(ctx context.Context, obj *T, opts PatchOptions) error {
	return c.apply(ctx, obj, opts)
}

// apply is Apply, over P.
func (c *client[P]) apply(ctx context.Context, obj P, opts PatchOptions) error {
	js := c.codec
	js.proto = false
	data, _, err := js.encode(obj)
	if err != nil {
		return err
	}
	return c.patchObject(ctx, obj, ApplyPatch, data, opts)
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
func (c *Client[T]) ApplyConfig(
	ctx context.Context,
	config any,
	opts PatchOptions,
) (*T, error) {
	return c.applyConfig(ctx, config, opts)
}

// applyConfig is ApplyConfig, over P.
func (c *client[P]) applyConfig(
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

// body is o as the metav1.DeleteOptions a delete request sends.
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

// nonEmpty is a pointer to s, or nil (a field left out) if s is "".
func nonEmpty[S ~string](s S) *S {
	if s == "" {
		return nil
	}
	return &s
}

// DeleteWithOptions deletes the object namespace/name with preconditions and
// a propagation policy: it is Delete sending opts. An object with finalizers
// is only marked for deletion.
func (c *Client[T]) DeleteWithOptions(
	ctx context.Context,
	namespace, name string,
	opts DeleteOptions,
) error {
	return c.delete(ctx, namespace, name, opts.body())
}

// DeleteAllOf deletes every object matching opts in one request
// (deletecollection). For a namespaced resource opts.Namespace is required.
func (c *Client[T]) DeleteAllOf(
	ctx context.Context,
	opts ListOptions,
	del DeleteOptions,
) error {
	return c.deleteAllOf(ctx, opts, del)
}

// deleteAllOf is DeleteAllOf, over P.
func (c *client[P]) deleteAllOf(
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

// ObjectClient is the part of *Client[T] that CreateOrUpdate,
// CreateOrPatch, AddFinalizer and RemoveFinalizer use. kctltest's
// FakeClient[T] has it too, so code that calls them can be unit tested
// without an API server:
//
//	op, err := kctl.CreateOrUpdate(ctx, configMaps, cm, mutate) // a *kctl.Client or a *kctltest.FakeClient
type ObjectClient[T any] interface {
	Get(ctx context.Context, namespace, name string) (*T, error)
	Create(ctx context.Context, obj *T) error
	Patch(
		ctx context.Context,
		obj *T,
		typ PatchType,
		data []byte,
		opts PatchOptions,
	) error
}

// Uncached returns a handle on the same resource whose Get and List always
// read from the API server: use it when an answer must be fresh.
func (c *Client[T]) Uncached() *Client[T] {
	u := *c
	u.cached = nil
	return &u
}

// Declare registers a user's own type (a CRD), or overrides the derived Resource
// of a k8s.io/api type, and returns r with Plural defaulted to Kind's plural:
//
//	var widgets = kctl.Declare[Widget](kctl.Resource{Group: "example.com", Version: "v1", Kind: "Widget", Namespaced: true})
//
// Declaring a type again the same way is harmless; differently, or without
// Version or Kind, is a mistake that ResourceOf (so every Client for T) reports.
//
// The API server is the truth: before each request, a Client checks r
// against the server's discovery document of r's group version, read once
// per Conn and again, at most once a second, while a check misses in it (so a
// CRD applied later is seen). A Kind or scope that disagrees with the server
// fails every call with an error naming the difference and the fix (e.g.
// "add Namespaced: true"); a group version, Plural or subresource the server
// does not serve fails with an error matching ErrNotInstalled that lists
// what it serves there. kctl never uses the server's answer in place of r.
func Declare[T any, PT Object[T]](r Resource) Resource {
	declared := apitype.Declare((*T)(nil), apitype.Resource(r))
	return Resource(declared)
}

// LoadConfig finds the cluster configuration, trying in order: the path given
// (a --kubeconfig flag; "" skips it), $KUBECONFIG (files, merged), the
// in-cluster service account, ~/.kube/config. The first source present wins,
// even if broken; when none is, the error lists what was tried. A
// $KUBECONFIG whose files are all missing is an error naming them; one
// missing among others is skipped with a warning. A kubeconfig cluster
// that sets insecure-skip-tls-verify is warned about, naming it. Warnings
// go to slog.Default() (a Manager's, to Options.Logger).
//
//	cfg, err := kctl.LoadConfig(*kubeconfig)
func LoadConfig(kubeconfig string) (*rest.Config, error) {
	return clusterconfig.Load(kubeconfig, "", slog.Default())
}
