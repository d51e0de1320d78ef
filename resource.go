package kctl

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Object is what every kctl type T meets through *T: a struct embedding
// metav1.TypeMeta and metav1.ObjectMeta, as k8s.io/api types and CRD structs do.
type Object[T any] interface {
	*T
	metav1.Object
}

// Resource says where objects of one Go type live in the API; the zero value
// names nothing. ResourceOf[appsv1.Deployment]() is, for example,
// Resource{Group: "apps", Version: "v1", Kind: "Deployment", Plural: "deployments", Namespaced: true}.
type Resource struct {
	Group      string // "" for the core group
	Version    string // e.g. "v1"
	Kind       string // e.g. "ReplicaSet"
	Plural     string // the URL segment, e.g. "replicasets"
	Namespaced bool
}

// APIVersion is "group/version", or "version" for the core group.
func (r Resource) APIVersion() string { return strings.TrimPrefix(r.Group+"/"+r.Version, "/") }

// String is "plural.group/version", e.g. "replicasets.apps/v1" or "pods/v1".
func (r Resource) String() string {
	return r.Plural + strings.TrimSuffix("."+r.Group, ".") + "/" + r.Version
}

// registry holds the declared types; Declare and ResourceOf may run concurrently.
var registry = struct {
	mu       sync.RWMutex
	declared map[reflect.Type]Resource
	bad      map[reflect.Type]error // a conflicting or invalid declaration, reported by ResourceOf
}{declared: map[reflect.Type]Resource{}, bad: map[reflect.Type]error{}}

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
	r.Plural = cmp.Or(r.Plural, pluralOf(r.Kind))
	t := reflect.TypeFor[T]()
	registry.mu.Lock()
	defer registry.mu.Unlock()
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

// ResourceOf returns T's declared Resource, or for a k8s.io/api type one derived
// from its package (group, version), name (kind), plural rules and tables.
func ResourceOf[T any]() (Resource, error) { return resourceFor(reflect.TypeFor[T]()) }

// resourceFor is ResourceOf for a reflect.Type.
func resourceFor(t reflect.Type) (Resource, error) {
	registry.mu.RLock()
	r, ok := registry.declared[t]
	err := registry.bad[t]
	registry.mu.RUnlock()
	switch {
	case err != nil:
		return Resource{}, err
	case !ok && t.Kind() == reflect.Struct && reflect.PointerTo(t).Implements(reflect.TypeFor[metav1.Object]()):
		r, ok = derive(t.PkgPath(), t.Name())
	}
	if !ok {
		return Resource{}, fmt.Errorf("kctl: no API resource known for Go type %s: declare it with kctl.Declare", typeName(t))
	}
	return r, nil
}

// typeName is "pkg.Name", e.g. "v1.Pod" or "main.Widget".
func typeName(t reflect.Type) string { return t.String() }

// derive is the Resource of a k8s.io/api type, e.g. ("k8s.io/api/apps/v1", "Deployment").
func derive(pkgPath, name string) (Resource, bool) {
	dir, version, _ := strings.Cut(strings.TrimPrefix(pkgPath, "k8s.io/api/"), "/")
	group, ok := apiGroups[dir]
	if !ok || !strings.HasPrefix(pkgPath, "k8s.io/api/") || version == "" || strings.Contains(version, "/") || name == "" {
		return Resource{}, false
	}
	return Resource{group, version, name, pluralOf(name), !strings.Contains(clusterScoped, " "+name+" ")}, true
}

// apiGroups maps each k8s.io/api v0.36 package directory to its API group
// (TestResourceOf_GroupTable_MatchesRegisterGo checks it against register.go).
var apiGroups = map[string]string{
	"core": "", "apps": "apps", "autoscaling": "autoscaling", "batch": "batch", "extensions": "extensions", "policy": "policy",
	"admission": "admission.k8s.io", "admissionregistration": "admissionregistration.k8s.io", "apidiscovery": "apidiscovery.k8s.io",
	"apiserverinternal": "internal.apiserver.k8s.io", "authentication": "authentication.k8s.io", "authorization": "authorization.k8s.io",
	"certificates": "certificates.k8s.io", "coordination": "coordination.k8s.io", "discovery": "discovery.k8s.io",
	"events": "events.k8s.io", "flowcontrol": "flowcontrol.apiserver.k8s.io", "imagepolicy": "imagepolicy.k8s.io",
	"networking": "networking.k8s.io", "node": "node.k8s.io", "rbac": "rbac.authorization.k8s.io", "resource": "resource.k8s.io",
	"scheduling": "scheduling.k8s.io", "storage": "storage.k8s.io", "storagemigration": "storagemigration.k8s.io",
}

// clusterScoped lists the k8s.io/api kinds outside namespaces, each between spaces.
const clusterScoped = " Namespace Node PersistentVolume ComponentStatus MutatingWebhookConfiguration ValidatingWebhookConfiguration" +
	" MutatingAdmissionPolicy MutatingAdmissionPolicyBinding ValidatingAdmissionPolicy ValidatingAdmissionPolicyBinding" +
	" StorageVersion TokenReview SelfSubjectReview SubjectAccessReview SelfSubjectAccessReview SelfSubjectRulesReview" +
	" CertificateSigningRequest ClusterTrustBundle FlowSchema PriorityLevelConfiguration IngressClass IPAddress ServiceCIDR" +
	" RuntimeClass ClusterRole ClusterRoleBinding PriorityClass CSIDriver CSINode StorageClass VolumeAttachment" +
	" VolumeAttributesClass StorageVersionMigration DeviceClass ResourceSlice DeviceTaintRule ResourcePoolStatusRequest "

// pluralOf is the plural resource name of a kind: lowercase, then consonant+"y"
// -> "ies"; "s", "x", "z", "ch", "sh" -> +"es"; else +"s" (but "endpoints").
func pluralOf(kind string) string {
	k := strings.ToLower(kind)
	switch n := len(k); {
	case k == "" || k == "endpoints":
		return k
	case n > 1 && k[n-1] == 'y' && !strings.ContainsRune("aeiou", rune(k[n-2])):
		return k[:n-1] + "ies"
	case strings.ContainsRune("sxz", rune(k[n-1])) || strings.HasSuffix(k, "ch") || strings.HasSuffix(k, "sh"):
		return k + "es"
	}
	return k + "s"
}

// metaOf returns obj's metadata; constructors check T through Object[T].
func metaOf[T any](obj *T) metav1.Object { return any(obj).(metav1.Object) }

// deepCopy returns a copy of obj that shares no memory with it: by
// DeepCopyInto if *T has one (k8s.io/api types, CRD types made with
// controller-gen), else by a JSON round trip: json.Marshal, then
// json.Unmarshal into a new T. Every copy kctl hands out (cached reads,
// reconciles) is made so. A CRD struct without DeepCopyInto must therefore
// come back from encoding/json as it went in, as it must to travel to and
// from the API server anyway:
//
//   - every field that carries data is exported and not `json:"-"` (others
//     are zero in every copy);
//   - no field is a func, a channel or a complex number (json.Marshal
//     fails: NewClient reports it, see jsonCopyable);
//   - a field of interface type comes back as map[string]any, []any,
//     float64, string or bool, not as the type it held: use concrete types;
//   - a type with a MarshalJSON method has an UnmarshalJSON that reads its
//     output back.
//
// A JSON copy costs a marshal and an unmarshal; a DeepCopyInto method avoids
// it. deepCopy panics if the round trip fails for one value (a MarshalJSON
// that fails); a reconcile recovers such a panic as an error.
func deepCopy[T any](obj *T) *T {
	if obj == nil {
		return nil
	}
	out := new(T)
	if dc, ok := any(obj).(interface{ DeepCopyInto(*T) }); ok {
		dc.DeepCopyInto(out)
	} else if err := jsonCopy(obj, out); err != nil {
		panic(fmt.Sprintf("kctl: deep copy of %s through JSON: %v", typeName(reflect.TypeFor[T]()), err))
	}
	return out
}

// jsonCopyable returns an error if deepCopy cannot copy a T: T has no
// DeepCopyInto and the JSON round trip of its zero value fails.
func jsonCopyable[T any]() error {
	if _, ok := any(new(T)).(interface{ DeepCopyInto(*T) }); ok {
		return nil
	}
	if err := jsonCopy(new(T), new(T)); err != nil {
		return fmt.Errorf("kctl: %s cannot be copied through JSON (%w): every field must survive json.Marshal and json.Unmarshal, "+
			"or give *%s a DeepCopyInto method", typeName(reflect.TypeFor[T]()), err, reflect.TypeFor[T]().Name())
	}
	return nil
}

// jsonCopy decodes the JSON encoding of in into out.
func jsonCopy(in, out any) error {
	b, err := json.Marshal(in)
	if err == nil {
		err = json.Unmarshal(b, out)
	}
	return err
}

// SetControllerReference makes owner the controller of child, adding or
// updating child's owner reference (controller and blockOwnerDeletion set,
// apiVersion and kind from owner's type). It fails, changing nothing, if child
// has another controller, if owner has no UID yet (create it first), or if a
// namespaced owner is not in child's namespace.
//
//	err := kctl.SetControllerReference(deployment, replicaSet)
func SetControllerReference[O any, PO Object[O], C any, PC Object[C]](owner *O, child *C) error {
	res, err := ResourceOf[O]()
	if err != nil {
		return err
	}
	om := PO(owner)
	cm := PC(child)
	why := ""
	switch c := metav1.GetControllerOfNoCopy(cm); {
	case om.GetUID() == "":
		why = "it has no UID yet; create it first"
	case res.Namespaced && om.GetNamespace() != cm.GetNamespace():
		why = "a namespaced owner must be in its dependent's namespace"
	case c != nil && c.UID != om.GetUID():
		why = fmt.Sprintf("it is already controlled by %s %s (uid %s)", c.Kind, c.Name, c.UID)
	}
	if why != "" {
		return fmt.Errorf("kctl: cannot make %s %s the controller of %s: %s", res.Kind, keyOf(om), keyOf(cm), why)
	}
	refs := slices.Clone(cm.GetOwnerReferences())
	i := slices.IndexFunc(refs, func(r metav1.OwnerReference) bool { return r.UID == om.GetUID() })
	if i < 0 {
		i = len(refs)
		refs = append(refs, metav1.OwnerReference{})
	}
	refs[i] = *metav1.NewControllerRef(om, schema.GroupVersionKind{Group: res.Group, Version: res.Version, Kind: res.Kind})
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
		select {
		case <-ctx.Done():
			return fmt.Errorf("kctl: retrying on conflict: %w (last: %w)", ctx.Err(), unprefixed(err))
		case <-time.After(wait + rand.N(wait/10+1)):
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
func CreateOrUpdate[T any](ctx context.Context, c *Client[T], obj *T, mutate func(*T) error) (OperationResult, error) {
	before, res, err := createOrGet(ctx, c, obj, mutate)
	if before == nil || equality.Semantic.DeepEqual(before, obj) {
		return res, err
	}
	patch, err := mergePatch(before, obj)
	if err != nil {
		return OperationResultNone, fmt.Errorf("kctl: update %s %s: %w", c.res, keyOf(metaOf(obj)), err)
	}
	meta, _ := patch["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		patch["metadata"] = meta
	}
	meta["resourceVersion"] = metaOf(before).GetResourceVersion() // optimistic concurrency: Conflict if stale
	data, _ := json.Marshal(patch)                                // decoded from JSON just before
	if err := c.Patch(ctx, obj, MergePatch, data, PatchOptions{}); err != nil {
		return OperationResultNone, err
	}
	return OperationResultUpdated, nil
}

// mergePatch is the JSON merge patch (RFC 7386) that turns before into after.
func mergePatch[T any](before, after *T) (map[string]any, error) {
	var was, is map[string]any
	if err := errors.Join(jsonCopy(before, &was), jsonCopy(after, &is)); err != nil {
		return nil, err
	}
	return diff(was, is), nil
}

// CreateOrPatch is CreateOrUpdate writing the change as a JSON merge patch (no optimistic
// concurrency: the fields mutate changed win), a changed status through the status subresource.
func CreateOrPatch[T any](ctx context.Context, c *Client[T], obj *T, mutate func(*T) error) (OperationResult, error) {
	before, res, err := createOrGet(ctx, c, obj, mutate)
	if before == nil {
		return res, err
	}
	change, err := mergePatch(before, obj)
	if err != nil {
		return res, fmt.Errorf("kctl: patch %s %s: %w", c.res, keyOf(metaOf(obj)), err)
	}
	parts := [2]map[string]any{change} // the object's change, then its status's
	if status, ok := parts[0]["status"]; ok {
		delete(parts[0], "status")
		parts[1] = map[string]any{"status": status}
	}
	for i, p := range parts {
		if len(p) == 0 {
			continue
		}
		data, _ := json.Marshal(p) // decoded from JSON just before
		if err := c.Patch(ctx, obj, MergePatch, data, PatchOptions{Subresource: [2]string{"", "status"}[i]}); err != nil {
			return res, err
		}
		res = [2]OperationResult{OperationResultUpdated, OperationResultUpdatedStatusOnly}[i]
	}
	if res == OperationResultUpdatedStatusOnly && len(parts[0]) > 0 {
		res = OperationResultUpdatedStatus
	}
	return res, nil
}

// createOrGet reads obj, applies mutate and creates obj if it did not exist.
// It returns the object as read if the caller must write a change, else nil.
func createOrGet[T any](ctx context.Context, c *Client[T], obj *T, mutate func(*T) error) (*T, OperationResult, error) {
	ns := metaOf(obj).GetNamespace()
	name := metaOf(obj).GetName()
	cur, err := c.Get(ctx, ns, name)
	var before *T
	switch {
	case err == nil:
		*obj = *cur
		before = deepCopy(cur)
	case !apierrors.IsNotFound(err) || errors.Is(err, ErrNotInstalled):
		return nil, OperationResultNone, err
	}
	if err := mutate(obj); err != nil {
		return nil, OperationResultNone, err
	}
	if m := metaOf(obj); m.GetNamespace() != ns || m.GetName() != name {
		return nil, OperationResultNone, fmt.Errorf("kctl: the mutate function changed %s into %s: it must keep the name and namespace", nsKey(ns, name), keyOf(m))
	}
	if before != nil {
		return before, OperationResultNone, nil
	}
	if err := c.Create(ctx, obj); err != nil {
		return nil, OperationResultNone, err
	}
	return nil, OperationResultCreated, nil
}

// diff is the JSON merge patch (RFC 7386) that turns a into b.
func diff(a, b map[string]any) map[string]any {
	d := map[string]any{}
	for k := range a {
		if _, ok := b[k]; !ok {
			d[k] = nil
		}
	}
	for k, bv := range b {
		am, aok := a[k].(map[string]any)
		if bm, bok := bv.(map[string]any); aok && bok {
			if sub := diff(am, bm); len(sub) > 0 {
				d[k] = sub
			}
		} else if av, ok := a[k]; !ok || !reflect.DeepEqual(av, bv) {
			d[k] = bv
		}
	}
	return d
}
