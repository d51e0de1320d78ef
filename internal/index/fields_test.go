package index

import (
	"strings"
	"testing"
)

// A declared type's CRD may add field labels only the server knows: the
// error says when Uncached() works instead of suggesting it.
func TestUnindexed_CustomResource_NamesSelectableFields(t *testing.T) {
	res := "widgets.example.com/v1"
	err := Unindexed("example.com", "Widget", res, true, "spec.size=3", "", []string{"spec.size"})
	for _, want := range []string{
		`kctl.IndexField(mgr, "spec.size", fn)`,
		"an Uncached() List works only if the CRD of widgets.example.com/v1 lists spec.size in selectableFields",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Unindexed(Widget, spec.size) = %q, want it to contain %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "or list with Uncached()") {
		t.Errorf("Unindexed(Widget, spec.size) = %q: suggests Uncached() unconditionally", err)
	}
}
