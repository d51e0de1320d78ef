package share

import (
	"reflect"
	"runtime"
	"sync"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// sharePod is a Pod as two decodes of one workload's Pods give it: equal
// content, none of it in the same memory.
func sharePod(name, image string) *corev1.Pod {
	cpu := resource.MustParse(clone("250m"))
	memory := resource.MustParse("64Mi")
	container := corev1.Container{
		Name:  clone("app"),
		Image: clone(image),
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{
				corev1.ResourceCPU:    cpu,
				corev1.ResourceMemory: memory,
			},
		},
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: clone("shop"),
			Name:      clone(name),
			UID:       "uid-" + "x",
			Labels:    map[string]string{clone("app"): clone("web")},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{container},
		},
	}
}

// clone returns s in memory of its own.
func clone(s string) string { return string([]byte(s)) }

func sameString(a, b string) bool {
	return unsafe.StringData(a) == unsafe.StringData(b)
}

// shareWarm shares n objects made by mk, so that the parts they have in
// common are remembered (a part is remembered when it is seen again, and a
// part holding other parts only once those are shared).
func shareWarm[T any](s *Sharer, n int, mk func() *T) {
	for range n {
		s.Share(mk())
	}
}

func TestSharer_SharesEqualPartsOnly(t *testing.T) {
	s := New((*corev1.Pod)(nil))
	shareWarm(s, 4, func() *corev1.Pod {
		return sharePod("pod-a", "web:1")
	})
	a := sharePod("pod-a", "web:1")
	b := sharePod("pod-b", "web:1")
	c := sharePod("pod-c", "web:2")
	c.Labels["tier"] = "front"
	cpu := resource.MustParse("500m")
	c.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = cpu
	for _, p := range []*corev1.Pod{a, b, c} {
		s.Share(p)
	}
	ca := &a.Spec.Containers[0]
	cb := &b.Spec.Containers[0]
	cc := &c.Spec.Containers[0]
	ra := ca.Resources.Requests
	rb := cb.Resources.Requests
	rc := cc.Resources.Requests
	for _, check := range []struct {
		what string
		got  bool
		want bool
	}{
		{"a and b share the namespace",
			sameString(a.Namespace, b.Namespace), true},
		{"a and b share the image",
			sameString(ca.Image, cb.Image), true},
		{"a and c share the container name",
			sameString(ca.Name, cc.Name), true},
		{"a and b share the labels",
			sameMap(a.Labels, b.Labels), true},
		{"a and b share the requests",
			sameMap(ra, rb), true},
		{"a and b share the containers",
			ca == cb, true},
		{"a and c do not share different labels",
			sameMap(a.Labels, c.Labels), false},
		{"a and c do not share different requests",
			sameMap(ra, rc), false},
		{"a and c do not share different images",
			sameString(ca.Image, cc.Image), false},
	} {
		if check.got != check.want {
			t.Errorf("%s: %v, want %v", check.what, check.got, check.want)
		}
	}
	if a.Labels["app"] != "web" || len(c.Labels) != 2 ||
		rc.Cpu().String() != "500m" || cc.Image != "web:2" {
		t.Errorf("sharing changed content: a %v, c %v %v %s",
			a.Labels, c.Labels, rc, cc.Image)
	}
	a2 := sharePod("pod-a", "web:1")
	s.Share(a2)
	if a.Name != "pod-a" || sameString(a.Name, a2.Name) {
		t.Errorf("names must be left alone: %q, shared with the next object of that name: %v",
			a.Name, sameString(a.Name, a2.Name))
	}
}

// sizeLimitPod is a Pod whose only volume has a SizeLimit of q, parsed
// into memory of its own.
func sizeLimitPod(q string) *corev1.Pod {
	limit := resource.MustParse(clone(q))
	dir := &corev1.EmptyDirVolumeSource{SizeLimit: &limit}
	volume := corev1.Volume{
		Name:         "tmp",
		VolumeSource: corev1.VolumeSource{EmptyDir: dir},
	}
	return &corev1.Pod{
		Spec: corev1.PodSpec{Volumes: []corev1.Volume{volume}},
	}
}

func sizeLimit(p *corev1.Pod) *resource.Quantity {
	return p.Spec.Volumes[0].EmptyDir.SizeLimit
}

// Regression (issue 15, item 14): whether two equal Quantities shared
// depended on the padding bytes after their scale, which nothing sets, and
// the test below failed in about half of the runs. Here the padding of one
// is dirty on purpose.
func TestSharer_QuantityPaddingDoesNotMatter(t *testing.T) {
	i, _ := quantityType.FieldByName("i")
	last := i.Type.Field(i.Type.NumField() - 1)
	pad := i.Offset + last.Offset + last.Type.Size()
	if pad >= i.Offset+i.Type.Size() {
		t.Skip("resource.Quantity has no padding after its scale in this version")
	}
	s := New((*corev1.Pod)(nil))
	pod := func() *corev1.Pod { return sizeLimitPod("64Mi") }
	shareWarm(s, 3, pod)
	a := pod()
	b := pod()
	dirty := unsafe.Add(unsafe.Pointer(sizeLimit(b)), pad)
	*(*byte)(dirty) = 0xff
	s.Share(a)
	s.Share(b)
	qa := sizeLimit(a)
	qb := sizeLimit(b)
	if qa != qb || qb.String() != "64Mi" {
		t.Errorf("equal quantities, one with dirty padding: shared %v, %s",
			qa == qb, qb.String())
	}
}

// A Quantity a reader would make its string for (String, Size) has it made
// before it is shared, so no reader writes memory other objects hold.
func TestSharer_QuantityStringMadeBeforeSharing(t *testing.T) {
	s := New((*corev1.Pod)(nil))
	// Not canonical: no cached string yet.
	pod := func() *corev1.Pod { return sizeLimitPod("2000m") }
	shareWarm(s, 3, pod)
	a := pod()
	b := pod()
	s.Share(a)
	s.Share(b)
	qa := sizeLimit(a)
	qb := sizeLimit(b)
	if qa != qb {
		t.Fatalf("equal quantities not shared")
	}
	var readers sync.WaitGroup
	readers.Go(func() { _ = qa.String() })
	// The race detector sees a write here if String was not made.
	readers.Go(func() { _ = b.Size() })
	readers.Wait()
	if qa.String() != "2" {
		t.Errorf("SizeLimit = %s, want 2", qa.String())
	}
}

var shareDefaultMode = int32(420)

// constantPod is a Pod whose namespace is a string constant and whose
// volume's mode points at a variable, as a transform may set them.
func constantPod() *corev1.Pod {
	config := &corev1.ConfigMapVolumeSource{DefaultMode: &shareDefaultMode}
	volume := corev1.Volume{
		Name:         "config",
		VolumeSource: corev1.VolumeSource{ConfigMap: config},
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "constant"},
		Spec:       corev1.PodSpec{Volumes: []corev1.Volume{volume}},
	}
}

// What an object holds need not be on the heap (a transform may set a
// string constant or a pointer to a variable); such parts share like any
// other, and the constant and the variable are never written.
func TestSharer_SharesConstantsAndVariables(t *testing.T) {
	s := New((*corev1.Pod)(nil))
	var pods []*corev1.Pod
	for range 5 {
		pods = append(pods, constantPod())
		s.Share(pods[len(pods)-1])
		runtime.GC()
	}
	a := pods[3]
	b := pods[4]
	namespace := sameString(a.Namespace, b.Namespace)
	volumes := &a.Spec.Volumes[0] == &b.Spec.Volumes[0]
	if !namespace || !volumes {
		t.Errorf("equal parts not shared: namespace %v, volumes %v",
			namespace, volumes)
	}
	mode := *b.Spec.Volumes[0].ConfigMap.DefaultMode
	if b.Namespace != "constant" || mode != 420 || shareDefaultMode != 420 {
		t.Errorf("sharing changed content: %q, mode %d, variable %d",
			b.Namespace, mode, shareDefaultMode)
	}
}

type shareTree struct {
	Name string
	Kids []shareTree
	Next *shareTree
	n    string // unexported: never touched
}

type shareNothing struct {
	A int
	B [2]float64
	c *string
}

func TestSharer_RecursiveAndEmptyTypes(t *testing.T) {
	if p := New((*shareNothing)(nil)).plan; p != nil {
		t.Errorf("a type without exported strings, maps, pointers or slices has a plan: %+v", p)
	}
	s := New((*shareTree)(nil))
	tree := func() *shareTree {
		leaf := shareTree{Name: clone("leaf"), n: clone("hidden")}
		return &shareTree{
			Name: clone("root"),
			Kids: []shareTree{leaf},
			Next: &shareTree{Name: clone("leaf")},
		}
	}
	shareWarm(s, 3, tree)
	x := tree()
	y := tree()
	s.Share(x)
	s.Share(y)
	names := sameString(x.Name, y.Name)
	leaves := sameString(x.Kids[0].Name, y.Next.Name)
	hidden := sameString(x.Kids[0].n, y.Kids[0].n)
	next := x.Next == y.Next
	if !names || !leaves || hidden || !next {
		t.Errorf("recursive type: names shared %v %v, unexported shared %v, Next shared %v",
			names, leaves, hidden, next)
	}
}

// The plan of a struct holds the padding of its elements, so that equal
// values compare equal whatever their padding holds.
func TestPlan_HolesAreThePadding(t *testing.T) {
	type padded struct {
		A byte
		B int64
		C byte
	}
	var v padded
	b := unsafe.Offsetof(v.B)
	c := unsafe.Offsetof(v.C)
	end := unsafe.Sizeof(v)
	got := holesOf(reflect.TypeFor[padded](), 0, nil)
	want := []span{{1, b - 1}, {c + 1, end - c - 1}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("holesOf(padded) = %v, want %v", got, want)
	}
}

// The zero Sharer shares nothing, and leaves objects alone.
func TestSharer_ZeroSharesNothing(t *testing.T) {
	var s Sharer
	a := sharePod("pod-a", "web:1")
	b := sharePod("pod-a", "web:1")
	for range 3 {
		s.Share(a)
		s.Share(b)
	}
	if sameString(a.Namespace, b.Namespace) || a.Namespace != "shop" {
		t.Errorf("the zero Sharer shared namespace %q", a.Namespace)
	}
}
