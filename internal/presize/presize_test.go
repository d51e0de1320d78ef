package presize_test

import (
	"reflect"
	"testing"

	"github.com/kctl-dev/kctl/internal/podfixture"
	"github.com/kctl-dev/kctl/internal/presize"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// variedPods are podfixture's first n Pods as protobuf.
func variedPods(t testing.TB, n int) [][]byte {
	t.Helper()
	var out [][]byte
	for i := range n {
		b, err := podfixture.Pod("shop", i).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

func TestPlan_VariedPods_EqualGeneratedWithSlicesAsLongAsTheirElements(t *testing.T) {
	plan := presize.For(reflect.TypeFor[corev1.Pod]())
	if plan == nil {
		t.Fatal("no plan for corev1.Pod")
	}
	grown := 0 // Pods the generated code leaves with spare room
	for i, b := range variedPods(t, 200) {
		want := new(corev1.Pod)
		if err := want.Unmarshal(b); err != nil {
			t.Fatal(err)
		}
		if len(spareSlices(reflect.ValueOf(want).Elem(), "pod")) > 0 {
			grown++
		}
		got := new(corev1.Pod)
		if err := plan.Unmarshal(got, b); err != nil {
			t.Fatalf("pod %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("pod %d decodes to\n%v\nwant\n%v", i, got, want)
		}
		spare := spareSlices(reflect.ValueOf(got).Elem(), "pod")
		if len(spare) > 0 {
			t.Fatalf("pod %d: slices with spare room: %v", i, spare)
		}
	}
	if grown == 0 {
		t.Fatal("the generated code left no Pod with spare room: the check proves nothing")
	}
}

// spareSlices lists the paths of the slices below v with more room than
// one allocation for their elements gives (their length, rounded up to
// the allocator's size class), going through structs, pointers and slices.
func spareSlices(v reflect.Value, path string) []string {
	var out []string
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			out = spareSlices(v.Elem(), path)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			sf := v.Type().Field(i)
			if sf.IsExported() {
				out = append(out, spareSlices(v.Field(i), path+"."+sf.Name)...)
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return nil
		}
		once := reflect.New(v.Type()).Elem()
		once.Grow(v.Len())
		if v.Cap() > once.Cap() {
			out = append(out, path)
		}
		for i := range v.Len() {
			out = append(out, spareSlices(v.Index(i), path)...)
		}
	}
	return out
}

func TestPlan_DecodingIntoAFilledObject_MergesAsGenerated(t *testing.T) {
	plan := presize.For(reflect.TypeFor[corev1.Pod]())
	bodies := variedPods(t, 2)
	want := new(corev1.Pod)
	got := new(corev1.Pod)
	for _, b := range bodies {
		if err := want.Unmarshal(b); err != nil {
			t.Fatal(err)
		}
		if err := plan.Unmarshal(got, b); err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("two Pods merged decode to\n%v\nwant\n%v", got, want)
	}
	n := len(podfixture.Pod("shop", 0).Spec.Containers)
	n += len(podfixture.Pod("shop", 1).Spec.Containers)
	if len(got.Spec.Containers) != n {
		t.Fatalf("merged %d containers", len(got.Spec.Containers))
	}
}

func TestPlan_OtherTypes_EqualGenerated(t *testing.T) {
	two := int32(2)
	pod := podfixture.Pod("shop", 3)
	tmpl := corev1.PodTemplateSpec{ObjectMeta: pod.ObjectMeta, Spec: pod.Spec}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Finalizers: []string{"a", "b", "c"},
			OwnerReferences: []metav1.OwnerReference{{Name: "o", UID: "u"}}},
		Spec: appsv1.DeploymentSpec{Replicas: &two, Template: tmpl},
	}
	b, err := dep.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	plan := presize.For(reflect.TypeFor[appsv1.Deployment]())
	got := new(appsv1.Deployment)
	if err := plan.Unmarshal(got, b); err != nil {
		t.Fatal(err)
	}
	want := new(appsv1.Deployment)
	if err := want.Unmarshal(b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded\n%v\nwant\n%v", got, want)
	}
	if s := spareSlices(reflect.ValueOf(got).Elem(), "deployment"); len(s) > 0 {
		t.Fatalf("slices with spare room: %v", s)
	}
}

func TestPlan_TypesWithNothingToSize_HaveNone(t *testing.T) {
	for _, typ := range []reflect.Type{
		reflect.TypeFor[metav1.Time](),
		reflect.TypeFor[corev1.PodCondition](),
		reflect.TypeFor[string](),
	} {
		if p := presize.For(typ); p != nil {
			t.Errorf("For(%v) = a plan, want nil", typ)
		}
	}
	var none *presize.Plan
	var cond corev1.PodCondition
	b, _ := (&corev1.PodCondition{Type: "Ready"}).Marshal()
	if err := none.Unmarshal(&cond, b); err != nil || cond.Type != "Ready" {
		t.Fatalf("a nil plan decoded %v, %v", cond, err)
	}
}

func TestPlan_MalformedBytes_FailLikeGenerated(t *testing.T) {
	plan := presize.For(reflect.TypeFor[corev1.Pod]())
	b := variedPods(t, 1)[0]
	for cut := 1; cut < len(b); cut += 97 {
		bad := b[:cut]
		wantErr := new(corev1.Pod).Unmarshal(bad)
		gotErr := plan.Unmarshal(new(corev1.Pod), bad)
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("cut at %d: got %v, generated %v", cut, gotErr, wantErr)
		}
	}
}

// BenchmarkUnmarshal_VariedPods decodes 500 of podfixture's varied Pods
// with the generated Unmarshal, with a Plan, and with a Plan and a Memo
// for the 500 (as an informer's list page): B/op is what each allocates
// for 500 Pods.
func BenchmarkUnmarshal_VariedPods(b *testing.B) {
	bodies := variedPods(b, 500)
	plan := presize.For(reflect.TypeFor[corev1.Pod]())
	for _, bc := range []struct {
		name string
		plan *presize.Plan
		memo bool
	}{{"generated", nil, false}, {"presized", plan, false}, {"presized+memo", plan, true}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var memo *presize.Memo
				if bc.memo {
					memo = presize.NewMemo()
				}
				for _, body := range bodies {
					err := bc.plan.UnmarshalMemo(memo, new(corev1.Pod), body)
					if err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

func TestMemo_VariedPods_EqualGeneratedAndShareEqualResources(t *testing.T) {
	plan := presize.For(reflect.TypeFor[corev1.Pod]())
	memo := presize.NewMemo()
	limits := map[uintptr]bool{} // the limits maps, by address
	var pods []*corev1.Pod
	bodies := variedPods(t, 200)
	for i, b := range bodies {
		want := new(corev1.Pod)
		if err := want.Unmarshal(b); err != nil {
			t.Fatal(err)
		}
		got := new(corev1.Pod)
		if err := plan.UnmarshalMemo(memo, got, b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("pod %d decodes to\n%v\nwant\n%v", i, got, want)
		}
		for _, c := range got.Spec.Containers {
			limits[reflect.ValueOf(c.Resources.Limits).Pointer()] = true
		}
		pods = append(pods, got)
	}
	// 20 workloads: their containers' resources, not 200 Pods' worth.
	if len(limits) > 3*podfixture.Workloads {
		t.Fatalf("%d limits maps in 200 Pods, want one per workload's container", len(limits))
	}
	// What the memo gave is unchanged by the Pods decoded after.
	for i, p := range pods {
		want := new(corev1.Pod)
		if err := want.Unmarshal(bodies[i]); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(p, want) {
			t.Fatalf("pod %d changed after decoding", i)
		}
	}
}

func TestMemo_AFieldTwice_MergesIntoMapsOfItsOwn(t *testing.T) {
	first := corev1.ResourceRequirements{Limits: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("1")}}
	second := corev1.ResourceRequirements{Limits: corev1.ResourceList{
		corev1.ResourceMemory: resource.MustParse("1Gi")}}
	container := func(rs ...corev1.ResourceRequirements) []byte {
		var out []byte
		for _, r := range rs {
			c := corev1.Container{Name: "app", Resources: r}
			b, err := c.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, b...) // a message twice: merged
		}
		return out
	}
	plan := presize.For(reflect.TypeFor[corev1.Container]())
	memo := presize.NewMemo()
	one := new(corev1.Container)
	if err := plan.UnmarshalMemo(memo, one, container(first)); err != nil {
		t.Fatal(err)
	}
	both := container(first, second)
	got := new(corev1.Container)
	if err := plan.UnmarshalMemo(memo, got, both); err != nil {
		t.Fatal(err)
	}
	want := new(corev1.Container)
	if err := want.Unmarshal(both); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) || len(got.Resources.Limits) != 2 {
		t.Fatalf("merged to %v, want %v", got.Resources, want.Resources)
	}
	if len(one.Resources.Limits) != 1 {
		t.Fatalf("the merge changed an earlier container's limits: %v", one.Resources.Limits)
	}
}

// FuzzPlan_DecodesAsGenerated: whatever the bytes, a Plan (with a Memo,
// decoding them twice) fails where the generated Unmarshal fails, and
// decodes what it decodes.
func FuzzPlan_DecodesAsGenerated(f *testing.F) {
	for _, b := range variedPods(f, 3) {
		f.Add(b)
	}
	plan := presize.For(reflect.TypeFor[corev1.Pod]())
	f.Fuzz(func(t *testing.T, b []byte) {
		want := new(corev1.Pod)
		wantErr := want.Unmarshal(b)
		memo := presize.NewMemo()
		for range 2 {
			got := new(corev1.Pod)
			err := plan.UnmarshalMemo(memo, got, b)
			if (err == nil) != (wantErr == nil) {
				t.Fatalf("error %v, generated %v", err, wantErr)
			}
			if err == nil && !reflect.DeepEqual(got, want) {
				t.Fatalf("decodes to\n%v\nwant\n%v", got, want)
			}
		}
	})
}
