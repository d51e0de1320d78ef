// Command crd runs a controller of Widgets, a custom resource declared as a
// plain Go struct: no code generation. Each Widget gets a ConfigMap holding
// its spec.data, owned by it; the Widget's status says whether that worked,
// and a finalizer deletes the ConfigMap before the Widget goes.
//
//	kubectl apply -f example/crd/crd.yaml
//	go run ./example/crd --kubeconfig ~/.kube/config
//	kubectl apply -f example/crd/widget.yaml && kubectl get widgets,configmaps
//
// With --webhook-cert-path it also serves Widget webhooks (webhooks.go): a
// validating one, a defaulting one, and the conversion between v1 and v2.
// In a cluster, without cert-manager (gencert makes the certificate and
// fills in the caBundles):
//
//	go run ./example/crd/gencert -dir /tmp/widgets-certs -host widgets-webhook.kctl-crd.svc
//	kubectl -n kctl-crd create secret tls widgets-webhook --cert=/tmp/widgets-certs/tls.crt --key=/tmp/widgets-certs/tls.key
//	sed "s|# caBundle: CA_BUNDLE.*|caBundle: $(cat /tmp/widgets-certs/ca.base64)|" example/crd/crd.yaml example/crd/webhook.yaml | kubectl apply -f -
//	kubectl apply -f example/crd/rbac.yaml -f example/crd/deployment.yaml
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/kbflags"
	"github.com/kctl-dev/kctl/webhook"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Widget is the Go side of crd.yaml: TypeMeta and ObjectMeta make it an object.
type Widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		Data map[string]string `json:"data,omitempty"` // copied into the Widget's ConfigMap
	} `json:"spec"`
	Status struct {
		ConfigMap          string             `json:"configMap,omitempty"`
		ObservedGeneration int64              `json:"observedGeneration,omitempty"`
		Conditions         []metav1.Condition `json:"conditions,omitempty"`
	} `json:"status,omitzero"`
}

// Declare tells kctl where Widgets live in the API: one line instead of generated code.
var _ = kctl.Declare[Widget](kctl.Resource{Group: "example.kctl.dev", Version: "v1", Kind: "Widget", Namespaced: true})

func main() {
	f := newFlags(flag.CommandLine)
	flag.Parse()
	log, err := f.Logger(os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	mgr, err := kctl.NewManager(f.Options(log)) // loads the config and connects; starts nothing yet
	if err == nil {
		// Metrics, probes and leader election are off unless turned on; "" leaves a server off.
		err = f.Serve(mgr, kctl.LeaderElection{Name: "widgets"})
	}
	if err == nil && f.webhookCertPath != "" {
		var hooks *webhook.Server
		hooks, err = webhook.Serve(mgr, ":9443", f.webhookCertPath) // on every replica, leader or not
		if err == nil {
			setupWebhooks(hooks)
		}
	}
	if err == nil {
		setup(mgr)
		// Until SIGINT or SIGTERM. Without the CRD, it warns and waits for it (/readyz?verbose says why).
		err = mgr.Start(kctl.SignalContext())
	}
	if err != nil {
		log.Error("crd stopped", "err", err)
		os.Exit(1)
	}
}

// flags are crd's command-line flags: kubebuilder's, so that its manifests
// and habits carry over, with --webhook-cert-path for its webhooks.
type flags struct {
	*kbflags.Flags
	webhookCertPath string
}

// newFlags defines crd's flags on fs; main and the tests call it.
func newFlags(fs *flag.FlagSet) *flags {
	f := &flags{Flags: kbflags.Register(fs, "reconcile only on the replica holding the Lease widgets (in the Pod's namespace)")}
	fs.StringVar(&f.webhookCertPath, "webhook-cert-path", "", `serve the webhooks on :9443 with tls.crt and tls.key of this directory ("" turns them off)`)
	return f
}

// setup adds the widgets controller to mgr; the tests call it too.
func setup(mgr *kctl.Manager) {
	widgets := kctl.ClientFor[Widget](mgr)                  // cached reads, writes to the API server
	cms := kctl.ClientFor[corev1.ConfigMap](mgr).Uncached() // our own writes may not be cached yet: read the server
	// The controller of Widgets calls reconcile for every Widget that changes.
	c := kctl.NewController(mgr, "widgets", func(ctx context.Context, w *Widget) (kctl.Result, error) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: w.Name}}
		op, err := kctl.CreateOrUpdate(ctx, cms, cm, func(cm *corev1.ConfigMap) error {
			if cm.UID != "" && !metav1.IsControlledBy(cm, w) { // never adopt someone else's ConfigMap
				return fmt.Errorf("ConfigMap %s/%s exists and is not this Widget's: rename one of them", cm.Namespace, cm.Name)
			}
			cm.Data = w.Spec.Data
			return kctl.SetControllerReference(w, cm)
		})
		cond := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "ConfigMapWritten", ObservedGeneration: w.Generation}
		if err != nil {
			cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "ConfigMapFailed", err.Error()
		}
		changed := meta.SetStatusCondition(&w.Status.Conditions, cond) // keeps LastTransitionTime if Status is unchanged
		if changed || w.Status.ConfigMap != cm.Name || w.Status.ObservedGeneration != w.Generation {
			w.Status.ConfigMap, w.Status.ObservedGeneration = cm.Name, w.Generation
			if err := widgets.UpdateStatus(ctx, w); err != nil { // the status subresource: spec is ignored
				return kctl.Result{}, err
			}
		}
		kctl.LoggerFrom(ctx).Info("reconciled", "configMap", op)
		return kctl.Result{}, err // a ConfigMap error is retried with backoff, after the status said so
	})
	// A change to a ConfigMap whose controller owner reference names a Widget
	// reconciles that Widget: edit or delete the ConfigMap and it comes back.
	kctl.Owns[corev1.ConfigMap](c)
	// Deleting a Widget waits until this cleanup returns nil; kctl adds the
	// finalizer before the first reconcile and removes it after. Owner
	// references would let the garbage collector delete the ConfigMap later;
	// a finalizer is for cleanup that must be done before the Widget goes
	// (here deleting the ConfigMap at once; in real life, outside resources).
	c.Finalizer("example.kctl.dev/configmap", func(ctx context.Context, w *Widget) error {
		cm, err := cms.Get(ctx, w.Namespace, w.Name)
		if apierrors.IsNotFound(err) || err == nil && !metav1.IsControlledBy(cm, w) {
			return nil // gone already, or not ours to delete
		}
		if err == nil { // UID: delete only the ConfigMap we just read
			err = cms.DeleteWithOptions(ctx, w.Namespace, w.Name, kctl.DeleteOptions{UID: cm.UID})
		}
		return err
	})
}
