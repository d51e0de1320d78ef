package discovery

import (
	"context"
	"errors"
	"testing"

	"github.com/kctl-dev/kctl/internal/apitype"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestCheck_NamesTheDifferenceAndTheFix(t *testing.T) {
	doc := map[string]metav1.APIResource{
		"widgets": {Name: "widgets", Kind: "Widget", Namespaced: true},
	}
	get := func(ctx context.Context, path string) (map[string]metav1.APIResource, error) {
		if path != "/apis/example.com/v1" {
			return nil, nil
		}
		return doc, nil
	}
	widget := Declared{
		Resource: apitype.Resource{Group: "example.com", Version: "v1", Kind: "Widget", Plural: "widgets", Namespaced: true},
		TypeName: "main.Widget",
	}
	call := Call{Verb: "update status of", What: "widgets.example.com/v1 ns/w"}
	var d Cache
	if err := d.Check(t.Context(), get, widget, call); err != nil {
		t.Errorf("Check of a served resource = %v", err)
	}
	otherKind := widget
	otherKind.Kind = "Gadget"
	err := d.Check(t.Context(), get, otherKind, call)
	want := "kctl: example.com/v1 serves widgets as kind Widget, not Gadget: correct Kind in kctl.Declare[main.Widget]"
	if err == nil || err.Error() != want {
		t.Errorf("Check of another kind = %v, want %q", err, want)
	}
	var notServed *NotServed
	sub := call
	sub.Sub = "status"
	err = d.Check(t.Context(), get, widget, sub)
	want = "kctl: update status of widgets.example.com/v1 ns/w: the server serves no status subresource of widgets: " +
		"add `subresources: {status: {}}` to version v1 of their CRD"
	if !errors.As(err, &notServed) || err.Error() != want || notServed.Status != nil ||
		!errors.Is(err, ErrNotInstalled) || apierrors.IsNotFound(err) {
		t.Errorf("Check of a missing subresource = %v, want a *NotServed %q matching ErrNotInstalled only", err, want)
	}
	otherGroup := widget
	otherGroup.Group = "example.org"
	err = d.Check(t.Context(), get, otherGroup, call)
	want = "kctl: widgets.example.org/v1 is not installed on the API server: apply its CRD " +
		"(the server serves no group version example.org/v1: check Group and Version in kctl.Declare[main.Widget])"
	if !errors.As(err, &notServed) || err.Error() != want || !apierrors.IsNotFound(notServed.Status) ||
		!errors.Is(err, ErrNotInstalled) || !apierrors.IsNotFound(err) {
		t.Errorf("Check of a group version not served = %v, want a *NotServed %q matching ErrNotInstalled and NotFound", err, want)
	}
}
