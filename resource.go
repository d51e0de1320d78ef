package kctl

// Which API resource a Go type is (Object, Resource, ResourceOf; Declare
// is on floor 2, client_more.go), the Key of an object, and how kctl
// copies objects (deepCopy).

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/kctl-dev/kctl/internal/apitype"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Key names the object a reconcile is for. Namespace is "" for cluster-scoped objects.
type Key struct{ Namespace, Name string }

// String is "namespace/name", or "name" for a cluster-scoped object.
func (k Key) String() string {
	if k.Namespace == "" {
		return k.Name
	}
	return k.Namespace + "/" + k.Name
}

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
func (r Resource) APIVersion() string {
	return apitype.Resource(r).APIVersion()
}

// String is "plural.group/version", e.g. "replicasets.apps/v1" or "pods/v1".
func (r Resource) String() string {
	return apitype.Resource(r).String()
}

// ResourceOf returns T's declared Resource, or for a k8s.io/api type one
// derived from its package (group, version), name (kind), plural rules
// and tables (internal/apitype).
func ResourceOf[T any]() (Resource, error) {
	r, _, err := apitype.Of((*T)(nil))
	return Resource(r), err
}

// typeName is T's name with its package's, e.g. "v1.Pod" or "main.Widget".
func typeName[T any]() string {
	var zero T
	return fmt.Sprintf("%T", zero)
}

// metaOf returns obj's metadata: obj is a *T for an Object[T], which
// constructors check. Over P (a pointer), it is compiled once for all
// types.
func metaOf[P any](obj P) metav1.Object { return any(obj).(metav1.Object) }

// keyOf is "namespace/name" or "name".
func keyOf(m metav1.Object) string { return nsKey(m.GetNamespace(), m.GetName()) }

func nsKey(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

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
		panic(fmt.Sprintf("kctl: deep copy of %s through JSON: %v", typeName[T](), err))
	}
	return out
}

// jsonCopyable returns an error if deepCopy cannot copy a T: T has no
// DeepCopyInto and the JSON round trip of its zero value fails.
func jsonCopyable[T any]() error {
	if _, ok := any(new(T)).(interface{ DeepCopyInto(*T) }); ok {
		return nil
	}
	err := jsonCopy(new(T), new(T))
	if err == nil {
		return nil
	}
	name := typeName[T]()
	_, short, _ := strings.Cut(name, ".")
	return fmt.Errorf("kctl: %s cannot be copied through JSON (%w): "+
		"every field must survive json.Marshal and json.Unmarshal, "+
		"or give *%s a DeepCopyInto method", name, err, short)
}

// jsonCopy decodes the JSON encoding of in into out.
func jsonCopy(in, out any) error {
	b, err := json.Marshal(in)
	if err == nil {
		err = json.Unmarshal(b, out)
	}
	return err
}
