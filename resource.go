package kctl

import (
	"fmt"

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
type Resource struct {
	Group      string // "" for the core group
	Version    string // e.g. "v1"
	Kind       string // e.g. "ReplicaSet"
	Plural     string // the URL segment, e.g. "replicasets"
	Namespaced bool
}

// APIVersion is "group/version", or "version" for the core group.
func (r Resource) APIVersion() string { panic("stub") }

// String is "plural.group/version", e.g. "replicasets.apps/v1".
func (r Resource) String() string { panic("stub") }

// Declare registers a user's own type (a CRD) in one line:
//
//	var widgets = kctl.Declare[Widget](kctl.Resource{Group: "example.com", Version: "v1", Kind: "Widget", Plural: "widgets", Namespaced: true})
func Declare[T any, PT Object[T]](r Resource) Resource { panic("stub") }

// ResourceOf returns the Resource of T: declared, or derived for k8s.io/api types.
func ResourceOf[T any]() (Resource, error) { return Resource{}, fmt.Errorf("stub") }

// metaOf returns obj's metadata accessor. Every constructor checked T through
// Object[T], so this assertion cannot fail inside kctl.
func metaOf[T any](obj *T) metav1.Object { return any(obj).(metav1.Object) }

// deepCopy returns a copy of obj that shares no memory with it.
func deepCopy[T any](obj *T) *T { panic("stub") }
