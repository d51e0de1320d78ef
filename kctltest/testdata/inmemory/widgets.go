// Package widgets is a user's CRD controller, tested in memory only
// (kctltest's TestInMemory_OutsideModule_NeedsNoControlPlane runs it).
package widgets

import (
	"context"

	"github.com/kctl-dev/kctl"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Widget is a custom resource with a size and a status.
type Widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		Size int `json:"size"`
	} `json:"spec"`
	Status struct {
		Ready bool `json:"ready,omitempty"`
	} `json:"status,omitzero"`
}

var _ = kctl.Declare[Widget](kctl.Resource{Group: "example.com", Version: "v1", Kind: "Widget", Namespaced: true})

// Setup adds the controller: a widget of positive size is ready.
func Setup(mgr *kctl.Manager) {
	widgets := kctl.ClientFor[Widget](mgr)
	kctl.NewController(mgr, "widgets", func(ctx context.Context, w *Widget) (kctl.Result, error) {
		ready := w.Spec.Size > 0
		if w.Status.Ready == ready {
			return kctl.Result{}, nil
		}
		w.Status.Ready = ready
		return kctl.Result{}, widgets.UpdateStatus(ctx, w)
	})
}
