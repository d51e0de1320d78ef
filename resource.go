package kctl

// Which API resource a Go type is (Object, Resource, ResourceOf; Declare
// is on floor 2, client_more.go), the Key of an object, and how kctl
// copies objects (deepCopy).

import (
	"fmt"

	"github.com/kctl-dev/kctl/internal/apitype"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Key names the object a reconcile is for. Namespace is "" for cluster-scoped objects.
type Key struct{ Namespace, Name string }

// String is "namespace/name", or "name" for a cluster-scoped object.
func (k Key) String() string { return nsKey(k.Namespace, k.Name) }

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
