package kctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Object is the constraint every kctl type parameter meets through its
// pointer: a struct that embeds metav1.TypeMeta and metav1.ObjectMeta, like
// every type in k8s.io/api and any hand-written CRD struct. No generated code
// (deepcopy, register.go) is needed.
type Object[T any] interface {
	*T
	metav1.Object
}

// Resource says where objects of one Go type live in the API.
//
//	r, _ := kctl.ResourceOf[appsv1.Deployment]()
//	// r == Resource{Group: "apps", Version: "v1", Kind: "Deployment", Plural: "deployments", Namespaced: true}
//
// The zero value names nothing. A Resource is a plain value: copy it freely.
type Resource struct {
	Group      string // "" for the core group
	Version    string // e.g. "v1"
	Kind       string // e.g. "ReplicaSet"
	Plural     string // the URL segment, e.g. "replicasets"
	Namespaced bool
}

// APIVersion is "group/version", or "version" for the core group.
func (r Resource) APIVersion() string {
	if r.Group == "" {
		return r.Version
	}
	return r.Group + "/" + r.Version
}

// String is "plural.group/version", e.g. "replicasets.apps/v1", or
// "plural/version" for the core group, e.g. "pods/v1".
func (r Resource) String() string {
	if r.Group == "" {
		return r.Plural + "/" + r.Version
	}
	return r.Plural + "." + r.Group + "/" + r.Version
}

// registry holds the declared types. Declarations normally happen in package
// variable initializers, but Declare and ResourceOf are safe to call from any
// goroutine at any time.
var registry struct {
	mu       sync.RWMutex
	declared map[reflect.Type]Resource
	bad      map[reflect.Type]error // a conflicting or invalid declaration, reported by ResourceOf
}

// Declare registers a user's own type (a CRD) in one line, typically as a
// package variable:
//
//	var widgets = kctl.Declare[Widget](kctl.Resource{Group: "example.com", Version: "v1", Kind: "Widget", Plural: "widgets", Namespaced: true})
//
// Plural defaults to the lowercase plural of Kind ("Policy" -> "policies").
// Declaring the same type twice with the same Resource is harmless; a
// different second declaration, or one without Version or Kind, is a mistake
// that ResourceOf (and so every Client for T) reports. Declare may also
// override the derived Resource of a k8s.io/api type. Declare returns r with
// Plural filled in. It is safe for concurrent use.
func Declare[T any, PT Object[T]](r Resource) Resource {
	if r.Plural == "" {
		r.Plural = pluralOf(r.Kind)
	}
	t := reflect.TypeFor[T]()
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if registry.declared == nil {
		registry.declared = map[reflect.Type]Resource{}
		registry.bad = map[reflect.Type]error{}
	}
	switch old, ok := registry.declared[t]; {
	case r.Version == "" || r.Kind == "":
		registry.bad[t] = fmt.Errorf("kctl: Declare[%s](%+v) needs at least Version and Kind", typeName(t), r)
	case ok && old != r:
		registry.bad[t] = fmt.Errorf("kctl: %s is declared twice, as %s (%s) and as %s (%s): keep one kctl.Declare",
			typeName(t), old, old.Kind, r, r.Kind)
	default:
		registry.declared[t] = r
	}
	return r
}

// ResourceOf returns the Resource of T: the declared one, or for k8s.io/api
// types one derived from the Go package (group and version), the type name
// (kind), a plural rule and a table of cluster-scoped kinds. Nothing is
// discovered from a server.
//
//	r, err := kctl.ResourceOf[corev1.ConfigMap]() // configmaps/v1, namespaced
func ResourceOf[T any]() (Resource, error) { return resourceFor(reflect.TypeFor[T]()) }

// resourceFor is ResourceOf for a reflect.Type.
func resourceFor(t reflect.Type) (Resource, error) {
	registry.mu.RLock()
	r, ok := registry.declared[t]
	err := registry.bad[t]
	registry.mu.RUnlock()
	if err != nil {
		return Resource{}, err
	}
	if ok {
		return r, nil
	}
	if t.Kind() == reflect.Struct && reflect.PointerTo(t).Implements(reflect.TypeFor[metav1.Object]()) {
		if r, ok := derive(t.PkgPath(), t.Name()); ok {
			return r, nil
		}
	}
	return Resource{}, fmt.Errorf("kctl: no API resource known for Go type %s: declare it with kctl.Declare", typeName(t))
}

// typeName is "pkg.Name", e.g. "v1.Pod" or "main.Widget".
func typeName(t reflect.Type) string {
	if t.PkgPath() == "" {
		return t.String()
	}
	return t.PkgPath()[strings.LastIndex(t.PkgPath(), "/")+1:] + "." + t.Name()
}

// derive computes the Resource of the type name in a k8s.io/api package, e.g.
// ("k8s.io/api/apps/v1", "Deployment"). It reports false for any other package.
func derive(pkgPath, name string) (Resource, bool) {
	dir, version, ok := strings.Cut(strings.TrimPrefix(pkgPath, "k8s.io/api/"), "/")
	if !ok || !strings.HasPrefix(pkgPath, "k8s.io/api/") || strings.Contains(version, "/") || name == "" {
		return Resource{}, false
	}
	group, ok := apiGroups[dir]
	if !ok {
		return Resource{}, false
	}
	return Resource{Group: group, Version: version, Kind: name, Plural: pluralOf(name), Namespaced: !clusterScoped[name]}, true
}

// apiGroups maps a k8s.io/api package directory to its API group (every group
// in k8s.io/api v0.36; TestResourceOf_GroupTable_MatchesRegisterGo checks it).
var apiGroups = map[string]string{
	"core": "", "apps": "apps", "autoscaling": "autoscaling", "batch": "batch", "extensions": "extensions", "policy": "policy",
	"admission": "admission.k8s.io", "admissionregistration": "admissionregistration.k8s.io",
	"apidiscovery": "apidiscovery.k8s.io", "apiserverinternal": "internal.apiserver.k8s.io",
	"authentication": "authentication.k8s.io", "authorization": "authorization.k8s.io",
	"certificates": "certificates.k8s.io", "coordination": "coordination.k8s.io", "discovery": "discovery.k8s.io",
	"events": "events.k8s.io", "flowcontrol": "flowcontrol.apiserver.k8s.io", "imagepolicy": "imagepolicy.k8s.io",
	"networking": "networking.k8s.io", "node": "node.k8s.io", "rbac": "rbac.authorization.k8s.io",
	"resource": "resource.k8s.io", "scheduling": "scheduling.k8s.io", "storage": "storage.k8s.io",
	"storagemigration": "storagemigration.k8s.io",
}

// clusterScoped lists the k8s.io/api kinds that live outside namespaces;
// every other kind is namespaced.
var clusterScoped = setOf(
	"Namespace", "Node", "PersistentVolume", "ComponentStatus", // core
	"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "MutatingAdmissionPolicy",
	"MutatingAdmissionPolicyBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
	"StorageVersion", "TokenReview", "SelfSubjectReview",
	"SubjectAccessReview", "SelfSubjectAccessReview", "SelfSubjectRulesReview",
	"CertificateSigningRequest", "ClusterTrustBundle", "FlowSchema", "PriorityLevelConfiguration",
	"IngressClass", "IPAddress", "ServiceCIDR", "RuntimeClass", "ClusterRole", "ClusterRoleBinding", "PriorityClass",
	"CSIDriver", "CSINode", "StorageClass", "VolumeAttachment", "VolumeAttributesClass", "StorageVersionMigration",
	"DeviceClass", "ResourceSlice", "DeviceTaintRule", "ResourcePoolStatusRequest",
)

// irregularPlurals are the kinds whose plural no rule gives.
var irregularPlurals = map[string]string{"endpoints": "endpoints"}

func setOf(s ...string) map[string]bool {
	m := make(map[string]bool, len(s))
	for _, k := range s {
		m[k] = true
	}
	return m
}

// pluralOf is the API's plural resource name of a kind: lowercase, then
// "y" after a consonant -> "ies", "s", "x", "z", "ch", "sh" -> +"es", else +"s".
func pluralOf(kind string) string {
	k := strings.ToLower(kind)
	if p, ok := irregularPlurals[k]; ok {
		return p
	}
	switch {
	case k == "":
		return ""
	case strings.HasSuffix(k, "y") && len(k) > 1 && !strings.ContainsRune("aeiou", rune(k[len(k)-2])):
		return k[:len(k)-1] + "ies"
	case strings.HasSuffix(k, "s"), strings.HasSuffix(k, "x"), strings.HasSuffix(k, "z"),
		strings.HasSuffix(k, "ch"), strings.HasSuffix(k, "sh"):
		return k + "es"
	}
	return k + "s"
}

// metaOf returns obj's metadata accessor. Every constructor checked T through
// Object[T], so this assertion cannot fail inside kctl.
func metaOf[T any](obj *T) metav1.Object { return any(obj).(metav1.Object) }

// deepCopy returns a copy of obj that shares no memory with it: through the
// generated DeepCopyInto when *T has one (every k8s.io/api type), else a JSON
// round trip (declared types; fields that JSON does not carry are dropped).
// It panics only if T cannot round-trip through JSON at all, which also makes
// the type unusable on the wire.
func deepCopy[T any](obj *T) *T {
	if obj == nil {
		return nil
	}
	out := new(T)
	if dc, ok := any(obj).(interface{ DeepCopyInto(*T) }); ok {
		dc.DeepCopyInto(out)
		return out
	}
	b, err := json.Marshal(obj)
	if err == nil {
		err = json.Unmarshal(b, out)
	}
	if err != nil {
		panic(fmt.Sprintf("kctl: deep copy of %s through JSON: %v", typeName(reflect.TypeFor[T]()), err))
	}
	return out
}

// SetControllerReference makes owner the controller of child: it adds (or
// updates) child's owner reference to owner with controller and
// blockOwnerDeletion set, taking owner's apiVersion and kind from its type.
// It fails, changing nothing, if child already has another controller, if
// owner has no UID yet (create it first), or if a namespaced owner is in
// another namespace than child or child is cluster-scoped.
//
//	err := kctl.SetControllerReference(deployment, replicaSet)
func SetControllerReference[O any, PO Object[O], C any, PC Object[C]](owner *O, child *C) error {
	res, err := ResourceOf[O]()
	if err != nil {
		return err
	}
	om, cm := PO(owner), PC(child)
	switch {
	case om.GetUID() == "":
		return fmt.Errorf("kctl: cannot make %s %s the controller of %s: it has no UID yet; create it first", res.Kind, keyOf(om), keyOf(cm))
	case res.Namespaced && om.GetNamespace() != cm.GetNamespace():
		return fmt.Errorf("kctl: cannot make %s %s the controller of %s: a namespaced owner must be in its dependent's namespace", res.Kind, keyOf(om), keyOf(cm))
	}
	ref := metav1.OwnerReference{APIVersion: res.APIVersion(), Kind: res.Kind, Name: om.GetName(), UID: om.GetUID(),
		Controller: new(true), BlockOwnerDeletion: new(true)}
	refs := append([]metav1.OwnerReference(nil), cm.GetOwnerReferences()...)
	at := len(refs)
	for i, r := range refs {
		if r.Controller != nil && *r.Controller && r.UID != ref.UID {
			return fmt.Errorf("kctl: cannot make %s %s the controller of %s: it is already controlled by %s %s (uid %s)",
				res.Kind, keyOf(om), keyOf(cm), r.Kind, r.Name, r.UID)
		}
		if r.UID == ref.UID {
			at = i
		}
	}
	if at == len(refs) {
		refs = append(refs, ref)
	}
	refs[at] = ref
	cm.SetOwnerReferences(refs)
	return nil
}

// RetryOnConflict calls fn until it returns an error that is not a Conflict
// (including nil), at most 5 times, waiting about 10ms, 20ms, 40ms, 80ms
// between tries. fn should read the object afresh each time. It returns the
// last error, or ctx's error if ctx ends while waiting.
//
//	err := kctl.RetryOnConflict(ctx, func() error {
//		cm, err := cms.Get(ctx, ns, name)
//		if err != nil { return err }
//		cm.Data["n"] = "2"
//		return cms.Update(ctx, cm)
//	})
func RetryOnConflict(ctx context.Context, fn func() error) error {
	wait := 10 * time.Millisecond
	for try := 1; ; try++ {
		err := fn()
		if err == nil || !apierrors.IsConflict(err) || try == 5 {
			return err
		}
		t := time.NewTimer(wait + rand.N(wait/10+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("kctl: retrying on conflict: %w (last: %w)", ctx.Err(), err)
		case <-t.C:
		}
		wait *= 2
	}
}

// OperationResult says what CreateOrUpdate or CreateOrPatch did.
type OperationResult string

const (
	OperationResultNone              OperationResult = "unchanged"
	OperationResultCreated           OperationResult = "created"
	OperationResultUpdated           OperationResult = "updated"
	OperationResultUpdatedStatus     OperationResult = "updated with status" // CreateOrPatch only
	OperationResultUpdatedStatusOnly OperationResult = "updated status only" // CreateOrPatch only
)

// CreateOrUpdate reads the object named by obj's namespace and name into
// obj, calls mutate(obj), and then creates it (if it did not exist) or
// updates it (if mutate changed it). mutate must not change the name or
// namespace. A stale read makes the update fail with Conflict: wrap the
// call in RetryOnConflict. Status changes are not written by Update when
// the resource has a status subresource; CreateOrPatch writes them.
func CreateOrUpdate[T any](ctx context.Context, c *Client[T], obj *T, mutate func(*T) error) (OperationResult, error) {
	before, res, err := createOrGet(ctx, c, obj, mutate)
	if before == nil {
		return res, err
	}
	if equality.Semantic.DeepEqual(before, obj) {
		return OperationResultNone, nil
	}
	if err := c.Update(ctx, obj); err != nil {
		return OperationResultNone, err
	}
	return OperationResultUpdated, nil
}

// CreateOrPatch is CreateOrUpdate that writes the change as a JSON merge
// patch (no optimistic concurrency: the fields mutate changed win), and
// patches a changed status through the status subresource.
func CreateOrPatch[T any](ctx context.Context, c *Client[T], obj *T, mutate func(*T) error) (OperationResult, error) {
	before, res, err := createOrGet(ctx, c, obj, mutate)
	if before == nil {
		return res, err
	}
	patch, err := mergePatch(before, obj)
	if err != nil {
		return OperationResultNone, fmt.Errorf("kctl: patch %s %s: %w", c.res, keyOf(metaOf(obj)), err)
	}
	status, hasStatus := patch["status"]
	delete(patch, "status")
	m := metaOf(obj)
	res = OperationResultNone
	for _, p := range []struct {
		patch map[string]any
		sub   string
		res   OperationResult
	}{{patch, "", OperationResultUpdated}, {map[string]any{"status": status}, "status", OperationResultUpdatedStatusOnly}} {
		if len(p.patch) == 0 || p.sub != "" && !hasStatus {
			continue
		}
		data, _ := json.Marshal(p.patch) // decoded from JSON just before
		out, err := c.Patch(ctx, m.GetNamespace(), m.GetName(), MergePatch, data, PatchOptions{Subresource: p.sub})
		if err != nil {
			return res, err
		}
		*obj = *out
		if res == OperationResultUpdated {
			res = OperationResultUpdatedStatus
		} else {
			res = p.res
		}
	}
	return res, nil
}

// createOrGet does the shared start of CreateOrUpdate and CreateOrPatch: it
// returns the object as read (before mutate) when the caller must write a
// change, else nil and the final result.
func createOrGet[T any](ctx context.Context, c *Client[T], obj *T, mutate func(*T) error) (*T, OperationResult, error) {
	m := metaOf(obj)
	ns, name := m.GetNamespace(), m.GetName()
	cur, err := c.Get(ctx, ns, name)
	switch {
	case apierrors.IsNotFound(err) && !errors.Is(err, ErrNotInstalled):
		if err := mutateKeep(obj, mutate, ns, name); err != nil {
			return nil, OperationResultNone, err
		}
		if err := c.Create(ctx, obj); err != nil {
			return nil, OperationResultNone, err
		}
		return nil, OperationResultCreated, nil
	case err != nil:
		return nil, OperationResultNone, err
	}
	*obj = *cur
	before := deepCopy(cur)
	if err := mutateKeep(obj, mutate, ns, name); err != nil {
		return nil, OperationResultNone, err
	}
	return before, "", nil
}

func mutateKeep[T any](obj *T, mutate func(*T) error, ns, name string) error {
	if err := mutate(obj); err != nil {
		return err
	}
	if m := metaOf(obj); m.GetNamespace() != ns || m.GetName() != name {
		return fmt.Errorf("kctl: the mutate function changed %s into %s: it must keep the name and namespace", nsKey(ns, name), keyOf(m))
	}
	return nil
}

// mergePatch is the JSON merge patch (RFC 7386) that turns a into b.
func mergePatch(a, b any) (map[string]any, error) {
	var am, bm map[string]any
	for _, x := range []struct {
		v   any
		out *map[string]any
	}{{a, &am}, {b, &bm}} {
		data, err := json.Marshal(x.v)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(data, x.out); err != nil {
			return nil, err
		}
	}
	return diff(am, bm), nil
}

func diff(a, b map[string]any) map[string]any {
	d := map[string]any{}
	for k, bv := range b {
		av, ok := a[k]
		am, aok := av.(map[string]any)
		bm, bok := bv.(map[string]any)
		switch {
		case ok && aok && bok:
			if sub := diff(am, bm); len(sub) > 0 {
				d[k] = sub
			}
		case !ok || !reflect.DeepEqual(av, bv):
			d[k] = bv
		}
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			d[k] = nil
		}
	}
	return d
}
