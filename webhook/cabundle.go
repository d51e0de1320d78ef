package webhook

// The caBundles ServeWithCertificates keeps: of the webhooks of named
// webhook configurations, and of CRDs' conversion webhooks.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/kctl-dev/kctl"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// publish sets every webhook's caBundle in the configurations, and each
// CRD's conversion webhook's, to bundle where it differs.
func (r *rotator) publish(ctx context.Context, bundle []byte) error {
	var errs []error
	for _, name := range r.c.ValidatingWebhooks {
		errs = append(errs, patchWebhooks(ctx, r.validating, name, bundle))
	}
	for _, name := range r.c.MutatingWebhooks {
		errs = append(errs, patchWebhooks(ctx, r.mutating, name, bundle))
	}
	for _, name := range r.c.CRDs {
		errs = append(errs, r.patchCRD(ctx, name, bundle))
	}
	return errors.Join(errs...)
}

// patchWebhooks sets the caBundle of every webhook of configuration name
// that differs, by a JSON patch that first tests each webhook's name.
func patchWebhooks[T any, PT configuration[T]](ctx context.Context, c *kctl.Client[T], name string, bundle []byte) error {
	obj, err := c.Get(ctx, "", name)
	if err != nil {
		return fmt.Errorf("%s %s: %w", kindOf(c), name, err)
	}
	var ops []map[string]any
	for i, w := range PT(obj).hooks() {
		if bytes.Equal(w.ClientConfig.CABundle, bundle) {
			continue
		}
		at := fmt.Sprintf("/webhooks/%d", i)
		ops = append(ops, map[string]any{"op": "test", "path": at + "/name", "value": w.Name},
			map[string]any{"op": "add", "path": at + "/clientConfig/caBundle", "value": bundle})
	}
	if len(ops) == 0 {
		return nil
	}
	patch, _ := json.Marshal(ops)
	err = c.Patch(ctx, obj, kctl.JSONPatch, patch, kctl.PatchOptions{})
	if err != nil {
		return fmt.Errorf("setting the caBundle of %s %s: %w", kindOf(c), name, err)
	}
	return nil
}

// patchCRD sets the caBundle of CRD name's conversion webhook, if it
// differs, by a merge patch.
func (r *rotator) patchCRD(ctx context.Context, name string, bundle []byte) error {
	crd, err := r.crds.Get(ctx, "", name)
	if err != nil {
		return fmt.Errorf("CustomResourceDefinition %s: %w", name, err)
	}
	if bytes.Equal(crd.Spec.Conversion.Webhook.ClientConfig.CABundle, bundle) {
		return nil
	}
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"conversion": map[string]any{
		"webhook": map[string]any{"clientConfig": map[string]any{"caBundle": bundle}}}}})
	err = r.crds.Patch(ctx, crd, kctl.MergePatch, patch, kctl.PatchOptions{})
	if err != nil {
		return fmt.Errorf("setting the caBundle of CustomResourceDefinition %s: %w", name, err)
	}
	return nil
}

// The fields of webhook configurations and CRDs that the rotator reads.
// kctl does not import their k8s.io/api packages: an API package's type
// registration links it into every program that imports this one.

type webhookClientConfig struct {
	Name         string `json:"name"`
	ClientConfig struct {
		CABundle []byte `json:"caBundle,omitempty"`
	} `json:"clientConfig"`
}

type validatingConfiguration struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Webhooks          []webhookClientConfig `json:"webhooks,omitempty"`
}

type mutatingConfiguration validatingConfiguration

func (v *validatingConfiguration) hooks() []webhookClientConfig { return v.Webhooks }
func (m *mutatingConfiguration) hooks() []webhookClientConfig   { return m.Webhooks }

// configuration is a webhook configuration type, through its pointer.
type configuration[T any] interface {
	kctl.Object[T]
	hooks() []webhookClientConfig
}

type crdConversion struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		Conversion struct {
			Webhook struct {
				ClientConfig struct {
					CABundle []byte `json:"caBundle,omitempty"`
				} `json:"clientConfig"`
			} `json:"webhook"`
		} `json:"conversion"`
	} `json:"spec"`
}

var (
	_ = kctl.Declare[validatingConfiguration](kctl.Resource{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingWebhookConfiguration"})
	_ = kctl.Declare[mutatingConfiguration](kctl.Resource{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "MutatingWebhookConfiguration"})
	_ = kctl.Declare[crdConversion](kctl.Resource{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
)

// kindOf names the kind c serves, for errors.
func kindOf[T any](*kctl.Client[T]) string {
	res, err := kctl.ResourceOf[T]()
	if err != nil {
		return "object"
	}
	return res.Kind
}
