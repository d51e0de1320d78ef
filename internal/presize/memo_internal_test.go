package presize

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestMemo_Full_RemembersNoMoreAndStillDecodes(t *testing.T) {
	plan := For(reflect.TypeFor[corev1.Container]())
	memo := NewMemo()
	for i := range memoMax + 10 {
		c := corev1.Container{Name: "app", Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(int64(i+1), resource.DecimalSI)}}}
		b, err := c.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		got := new(corev1.Container)
		if err := plan.UnmarshalMemo(memo, got, b); err != nil {
			t.Fatal(err)
		}
		q := got.Resources.Limits[corev1.ResourceCPU]
		if q.MilliValue() != int64(i+1) {
			t.Fatalf("container %d: cpu %v", i, q.String())
		}
	}
	if memo.n != memoMax {
		t.Fatalf("the memo holds %d values, want its bound %d", memo.n, memoMax)
	}
}
