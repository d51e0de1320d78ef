package objprep

import (
	"testing"

	"github.com/kctl-dev/kctl/internal/objcodec"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func withFields() *metav1.ObjectMeta {
	return &metav1.ObjectMeta{
		Name:          "a",
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
	}
}

func TestFunc_DropsManagedFieldsThenTransforms(t *testing.T) {
	var wire objcodec.Wire
	prepare := Func[*metav1.ObjectMeta](false, nil, &wire)
	obj := withFields()
	prepare(obj)
	if obj.ManagedFields != nil {
		t.Errorf("managedFields kept: %v", obj.ManagedFields)
	}
	if !wire.SkipManagedFields || !wire.Reuse {
		t.Errorf("no transform, not kept: wire %+v, want SkipManagedFields and Reuse", wire)
	}

	var seen int
	transform := func(obj *metav1.ObjectMeta) {
		seen = len(obj.ManagedFields)
		obj.Labels = map[string]string{"t": "1"}
	}
	prepare = Func(true, transform, &wire)
	obj = withFields()
	prepare(obj)
	if len(obj.ManagedFields) != 1 || seen != 1 || obj.Labels["t"] != "1" {
		t.Errorf("kept and transformed: %+v (transform saw %d managedFields)", obj, seen)
	}
	if wire.SkipManagedFields || wire.Reuse {
		t.Errorf("a transform, kept: wire %+v, want neither", wire)
	}

	prepare = Func(false, transform, &wire)
	obj = withFields()
	prepare(obj)
	if seen != 0 {
		t.Errorf("transform saw %d managedFields, want them dropped first", seen)
	}
}
