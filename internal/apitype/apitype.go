// Package apitype says which API resource a Go type is: a declared one
// from a registry (kctl.Declare), or a k8s.io/api one derived from its
// package path (group and version) and name (kind), with the plural rules
// and the tables below; a Resource's request path (Path), a list's or
// watch's query (query.go) and an object's TypeMeta (SetTypeMeta). It is
// the one place kctl looks at Go types by reflection.
package apitype

import (
	"cmp"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Resource is kctl.Resource: where objects of a Go type live in the API.
type Resource struct {
	Group      string
	Version    string
	Kind       string
	Plural     string
	Namespaced bool
}

// APIVersion is "group/version", or "version" for the core group.
func (r Resource) APIVersion() string {
	gv := r.Group + "/" + r.Version
	return strings.TrimPrefix(gv, "/")
}

// String is "plural.group/version", e.g. "replicasets.apps/v1".
func (r Resource) String() string {
	group := strings.TrimSuffix("."+r.Group, ".")
	return r.Plural + group + "/" + r.Version
}

// SetTypeMeta sets the apiVersion and kind of obj, if it has a
// metav1.TypeMeta (GetObjectKind), as a decoder must for protobuf, which
// does not carry them.
func SetTypeMeta(obj any, apiVersion, kind string) {
	type kinded interface{ GetObjectKind() schema.ObjectKind }
	o, ok := obj.(kinded)
	if !ok {
		return
	}
	tm, ok := o.GetObjectKind().(*metav1.TypeMeta)
	if ok && tm != nil {
		tm.APIVersion = apiVersion
		tm.Kind = kind
	}
}

// Path is the URL path of r's objects in namespace ("" for every
// namespace, or for a cluster-scoped r), of the object name if not "",
// and of its subresource sub if not "", e.g.
// "/apis/apps/v1/namespaces/shop/deployments/web/status".
func (r Resource) Path(namespace, name, sub string) string {
	path := "/api/" + r.Version
	if r.Group != "" {
		path = "/apis/" + r.Group + "/" + r.Version
	}
	if r.Namespaced && namespace != "" {
		path += "/namespaces/" + url.PathEscape(namespace)
	}
	path += "/" + r.Plural
	if name != "" {
		path += "/" + url.PathEscape(name)
	}
	if sub != "" {
		path += "/" + sub
	}
	return path
}

// registry holds the declared types. Declare and Of may run
// concurrently.
var registry = struct {
	mu       sync.RWMutex
	declared map[reflect.Type]Resource
	// bad holds a conflicting or invalid declaration, which Of reports.
	bad map[reflect.Type]error
}{
	declared: map[reflect.Type]Resource{},
	bad:      map[reflect.Type]error{},
}

// Declare registers the Go type that sample points to (a *T, nil is
// fine: (*T)(nil)) as r, with Plural defaulted to Kind's plural, and
// returns it. Declaring a type again the same way is harmless;
// differently, or without Version or Kind, is a mistake that Of reports.
// kctl's generic Declare[T] calls it: nothing here is generic over T.
func Declare(sample any, r Resource) Resource {
	r.Plural = cmp.Or(r.Plural, Plural(r.Kind))
	t := reflect.TypeOf(sample).Elem()
	name := t.String()
	registry.mu.Lock()
	defer registry.mu.Unlock()
	old, ok := registry.declared[t]
	switch {
	case r.Version == "" || r.Kind == "":
		registry.bad[t] = fmt.Errorf(
			"kctl: Declare[%s](%+v) needs at least Version and Kind",
			name, r)
	case ok && old != r:
		registry.bad[t] = fmt.Errorf(
			"kctl: %s is declared twice, as %s (%s) and as %s (%s): "+
				"keep one kctl.Declare",
			name, old, old.Kind, r, r.Kind)
	default:
		registry.declared[t] = r
	}
	return r
}

// Of returns the Resource of the Go type that sample points to (a *T, nil
// is fine), and whether it was declared.
func Of(sample any) (r Resource, declared bool, err error) {
	return OfType(reflect.TypeOf(sample).Elem())
}

// OfType is Of for a reflect.Type.
func OfType(t reflect.Type) (r Resource, declared bool, err error) {
	registry.mu.RLock()
	r, declared = registry.declared[t]
	err = registry.bad[t]
	registry.mu.RUnlock()
	if err != nil {
		return Resource{}, false, err
	}
	if declared {
		return r, true, nil
	}
	meta := reflect.TypeFor[metav1.Object]()
	ok := false
	isStruct := t.Kind() == reflect.Struct
	if isStruct && reflect.PointerTo(t).Implements(meta) {
		r, ok = Derive(t.PkgPath(), t.Name())
	}
	if !ok {
		err = fmt.Errorf("kctl: no API resource known for Go type %s: "+
			"declare it with kctl.Declare", t)
		return Resource{}, false, err
	}
	return r, false, nil
}

// Declared returns every declared Resource, in no order.
func Declared() []Resource {
	registry.mu.RLock()
	defer registry.mu.RUnlock()
	out := make([]Resource, 0, len(registry.declared))
	for _, r := range registry.declared {
		out = append(out, r)
	}
	return out
}

// Derive is the Resource of a k8s.io/api type, e.g. of
// ("k8s.io/api/apps/v1", "Deployment").
func Derive(pkgPath, name string) (Resource, bool) {
	rest, ok := strings.CutPrefix(pkgPath, "k8s.io/api/")
	if !ok || name == "" {
		return Resource{}, false
	}
	dir, version, _ := strings.Cut(rest, "/")
	group, ok := Groups[dir]
	if !ok || version == "" || strings.Contains(version, "/") {
		return Resource{}, false
	}
	r := Resource{
		Group:      group,
		Version:    version,
		Kind:       name,
		Plural:     Plural(name),
		Namespaced: !strings.Contains(clusterScoped, " "+name+" "),
	}
	return r, true
}

// Groups maps each k8s.io/api v0.36 package directory to its API group
// (kctl's TestResourceOf_GroupTable_MatchesRegisterGo checks it against
// register.go).
var Groups = map[string]string{
	"core":                  "",
	"apps":                  "apps",
	"autoscaling":           "autoscaling",
	"batch":                 "batch",
	"extensions":            "extensions",
	"policy":                "policy",
	"admission":             "admission.k8s.io",
	"admissionregistration": "admissionregistration.k8s.io",
	"apidiscovery":          "apidiscovery.k8s.io",
	"apiserverinternal":     "internal.apiserver.k8s.io",
	"authentication":        "authentication.k8s.io",
	"authorization":         "authorization.k8s.io",
	"certificates":          "certificates.k8s.io",
	"coordination":          "coordination.k8s.io",
	"discovery":             "discovery.k8s.io",
	"events":                "events.k8s.io",
	"flowcontrol":           "flowcontrol.apiserver.k8s.io",
	"imagepolicy":           "imagepolicy.k8s.io",
	"networking":            "networking.k8s.io",
	"node":                  "node.k8s.io",
	"rbac":                  "rbac.authorization.k8s.io",
	"resource":              "resource.k8s.io",
	"scheduling":            "scheduling.k8s.io",
	"storage":               "storage.k8s.io",
	"storagemigration":      "storagemigration.k8s.io",
}

// clusterScoped lists the k8s.io/api kinds outside namespaces, each
// between spaces.
const clusterScoped = " Namespace Node PersistentVolume ComponentStatus" +
	" MutatingWebhookConfiguration ValidatingWebhookConfiguration" +
	" MutatingAdmissionPolicy MutatingAdmissionPolicyBinding" +
	" ValidatingAdmissionPolicy ValidatingAdmissionPolicyBinding" +
	" StorageVersion TokenReview SelfSubjectReview SubjectAccessReview" +
	" SelfSubjectAccessReview SelfSubjectRulesReview" +
	" CertificateSigningRequest ClusterTrustBundle FlowSchema" +
	" PriorityLevelConfiguration IngressClass IPAddress ServiceCIDR" +
	" RuntimeClass ClusterRole ClusterRoleBinding PriorityClass CSIDriver" +
	" CSINode StorageClass VolumeAttachment VolumeAttributesClass" +
	" StorageVersionMigration DeviceClass ResourceSlice DeviceTaintRule" +
	" ResourcePoolStatusRequest "

// Plural is the plural resource name of a kind: lowercase, then
// consonant+"y" -> "ies"; "s", "x", "z", "ch", "sh" -> +"es"; else +"s"
// (but "endpoints").
func Plural(kind string) string {
	k := strings.ToLower(kind)
	n := len(k)
	switch {
	case k == "" || k == "endpoints":
		return k
	case n > 1 && k[n-1] == 'y' && !isVowel(k[n-2]):
		return k[:n-1] + "ies"
	case strings.ContainsRune("sxz", rune(k[n-1])):
		return k + "es"
	case strings.HasSuffix(k, "ch") || strings.HasSuffix(k, "sh"):
		return k + "es"
	}
	return k + "s"
}

func isVowel(c byte) bool { return strings.IndexByte("aeiou", c) >= 0 }
