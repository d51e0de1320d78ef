package main

// The Widget webhooks: a validating one (ConfigMap keys), a defaulting one
// (a label) and the conversion between v1 (Widget, stored) and v2
// (WidgetV2, which lists its data as items).

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/webhook"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// WidgetV2 is version v2 of Widget: spec.data as a list of items, sorted
// by key. v1 is stored; the API server converts through the webhook.
type WidgetV2 struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		Items []Item `json:"items,omitempty"`
	} `json:"spec"`
	Status struct {
		ConfigMap          string             `json:"configMap,omitempty"`
		ObservedGeneration int64              `json:"observedGeneration,omitempty"`
		Conditions         []metav1.Condition `json:"conditions,omitempty"`
	} `json:"status,omitzero"`
}

// Item is one key and value of a WidgetV2's data.
type Item struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

var _ = kctl.Declare[WidgetV2](kctl.Resource{Group: "example.kctl.dev", Version: "v2", Kind: "Widget", Namespaced: true})

// managedBy is the label the defaulting webhook sets.
const managedBy = "app.kubernetes.io/managed-by"

// setupWebhooks registers the Widget webhooks on hooks, at the paths
// webhook.yaml and crd.yaml name: /validate-example-kctl-dev-v1-widget,
// /mutate-example-kctl-dev-v1-widget and /convert.
func setupWebhooks(hooks *webhook.Server) {
	webhook.Validate(hooks, validateWidget)
	webhook.Default(hooks, defaultWidget)
	webhook.Convert(hooks, widgetToV2, widgetToV1)
}

// validateWidget denies a Widget whose data could not be a ConfigMap's,
// and warns of one with no data.
func validateWidget(ctx context.Context, req webhook.AdmissionRequest[Widget]) ([]string, error) {
	w := req.Object
	if w == nil { // a DELETE: nothing to check
		return nil, nil
	}
	var problems []string
	for _, k := range slices.Sorted(maps.Keys(w.Spec.Data)) {
		for _, msg := range validation.IsConfigMapKey(k) {
			problems = append(problems, fmt.Sprintf("spec.data key %q: %s", k, msg))
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	if len(w.Spec.Data) == 0 {
		return []string{"spec.data is empty: the Widget's ConfigMap will be too"}, nil
	}
	return nil, nil
}

// defaultWidget labels a Widget as managed by this controller.
func defaultWidget(ctx context.Context, w *Widget) error {
	if w.Labels[managedBy] != "" {
		return nil
	}
	if w.Labels == nil {
		w.Labels = map[string]string{}
	}
	w.Labels[managedBy] = "kctl-widgets"
	return nil
}

// widgetToV2 lists v1's data map as v2's items, sorted by key.
func widgetToV2(src *Widget, dst *WidgetV2) error {
	for _, k := range slices.Sorted(maps.Keys(src.Spec.Data)) {
		dst.Spec.Items = append(dst.Spec.Items, Item{Key: k, Value: src.Spec.Data[k]})
	}
	dst.Status = src.Status
	return nil
}

// widgetToV1 makes v2's items v1's data map; a key listed twice cannot be.
func widgetToV1(src *WidgetV2, dst *Widget) error {
	if len(src.Spec.Items) > 0 {
		dst.Spec.Data = map[string]string{}
	}
	for _, it := range src.Spec.Items {
		if _, dup := dst.Spec.Data[it.Key]; dup {
			return fmt.Errorf("spec.items lists key %q twice", it.Key)
		}
		dst.Spec.Data[it.Key] = it.Value
	}
	dst.Status = src.Status
	return nil
}
