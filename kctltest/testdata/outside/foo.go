// Package foo is a small CRD controller in a module of its own, as a kctl
// user would write it: each Foo gets a ConfigMap holding its greeting. kctl's
// tests run this module's tests to check that package kctltest works from
// outside kctl's module, with its exported API only.
package foo

import (
	"context"

	"github.com/kctl-dev/kctl"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Foo is the Go side of testdata/foo-crd.yaml.
type Foo struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		Greeting string `json:"greeting,omitempty"`
	} `json:"spec"`
	Status struct {
		ConfigMap          string `json:"configMap,omitempty"`
		ObservedGeneration int64  `json:"observedGeneration,omitempty"`
	} `json:"status,omitzero"`
}

var _ = kctl.Declare[Foo](kctl.Resource{Group: "example.com", Version: "v1", Kind: "Foo", Namespaced: true})

// Setup adds the Foo controller to mgr.
func Setup(mgr *kctl.Manager) {
	c := kctl.NewController(mgr, "foo", Reconcile(kctl.ClientFor[Foo](mgr), kctl.ClientFor[corev1.ConfigMap](mgr).Uncached()))
	kctl.Owns[corev1.ConfigMap](c)
}

// FooStatusWriter and ConfigMaps are what Reconcile needs: a *kctl.Client
// satisfies them, and so does a *kctltest.FakeClient in a unit test.
type FooStatusWriter interface {
	UpdateStatus(ctx context.Context, foo *Foo) error
}

type ConfigMaps interface {
	Get(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error)
	Create(ctx context.Context, cm *corev1.ConfigMap) error
	Update(ctx context.Context, cm *corev1.ConfigMap) error
}

// Reconcile writes foo's greeting into its ConfigMap, then its status.
func Reconcile(foos FooStatusWriter, cms ConfigMaps) func(ctx context.Context, foo *Foo) (kctl.Result, error) {
	return func(ctx context.Context, foo *Foo) (kctl.Result, error) {
		name := foo.Name + "-greeting"
		cm, err := cms.Get(ctx, foo.Namespace, name)
		if apierrors.IsNotFound(err) {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: foo.Namespace, Name: name}}
			err = nil
		}
		if err != nil {
			return kctl.Result{}, err
		}
		cm.Data = map[string]string{"greeting": foo.Spec.Greeting}
		if err := kctl.SetControllerReference(foo, cm); err != nil {
			return kctl.Result{}, kctl.Terminal(err)
		}
		if cm.ResourceVersion == "" {
			err = cms.Create(ctx, cm)
		} else {
			err = cms.Update(ctx, cm)
		}
		if err != nil {
			return kctl.Result{}, err
		}
		if foo.Status.ConfigMap == name && foo.Status.ObservedGeneration == foo.Generation {
			return kctl.Result{}, nil
		}
		foo.Status.ConfigMap = name
		foo.Status.ObservedGeneration = foo.Generation
		return kctl.Result{}, foos.UpdateStatus(ctx, foo)
	}
}
