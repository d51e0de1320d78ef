package kctl

import (
	"bytes"
	"fmt"
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
	clone := func(s string) string { return string([]byte(s)) }
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: clone("shop"), Name: clone(name), UID: "uid-" + "x",
			Labels: map[string]string{clone("app"): clone("web")}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: clone("app"), Image: clone(image),
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse(clone("250m")), corev1.ResourceMemory: resource.MustParse("64Mi")}},
		}}},
	}
}

func sameString(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

func TestSharer_SharesEqualPartsOnly(t *testing.T) {
	s := newSharer[corev1.Pod]()
	a, b, c := sharePod("a", "web:1"), sharePod("b", "web:1"), sharePod("c", "web:2")
	c.Labels["tier"] = "front"
	c.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("500m")
	for _, p := range []*corev1.Pod{a, b, c} {
		s.share(p)
	}
	ca, cb, cc := &a.Spec.Containers[0], &b.Spec.Containers[0], &c.Spec.Containers[0]
	for _, check := range []struct {
		what string
		got  bool
		want bool
	}{
		{"a and b share the namespace", sameString(a.Namespace, b.Namespace), true},
		{"a and b share the image", sameString(ca.Image, cb.Image), true},
		{"a and c share the container name", sameString(ca.Name, cc.Name), true},
		{"a and b share the labels", sameMap(a.Labels, b.Labels), true},
		{"a and b share the requests", sameMap(ca.Resources.Requests, cb.Resources.Requests), true},
		{"a and c do not share different labels", sameMap(a.Labels, c.Labels), false},
		{"a and c do not share different requests", sameMap(ca.Resources.Requests, cc.Resources.Requests), false},
		{"a and c do not share different images", sameString(ca.Image, cc.Image), false},
	} {
		if check.got != check.want {
			t.Errorf("%s: %v, want %v", check.what, check.got, check.want)
		}
	}
	if a.Labels["app"] != "web" || len(c.Labels) != 2 || cc.Resources.Requests.Cpu().String() != "500m" || cc.Image != "web:2" {
		t.Errorf("sharing changed content: a %v, c %v %v %s", a.Labels, c.Labels, cc.Resources.Requests, cc.Image)
	}
	if a.Name != "a" || b.Name != "b" || s.strs.cur["b"] != "" {
		t.Errorf("names must be left alone and unremembered: %q %q, remembered %q", a.Name, b.Name, s.strs.cur["b"])
	}
}

// A stream of unique values (here each Pod's IP and a large annotation)
// keeps at most two generations, by count and by bytes; a value in use
// survives the turn of a generation; a value too large is not remembered.
func TestSharer_ForgetsOldGenerations(t *testing.T) {
	s := newSharer[corev1.Pod]()
	big := string(make([]byte, shareMaxValue+1))
	for i := range 3 * shareGeneration {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: string([]byte("kept")),
			Annotations: map[string]string{"note": fmt.Sprintf("%0400d", i)}, Labels: map[string]string{"big": big}},
			Status: corev1.PodStatus{PodIP: fmt.Sprint("10.0.", i)}}
		s.share(p)
		if _, ok := s.strs.get(s.gen, "kept"); !ok {
			t.Fatalf("after %d Pods, a string used all along was forgotten", i)
		}
	}
	values, bytes := 0, 0
	for k, v := range s.strs.cur {
		values, bytes = values+1, bytes+len(k)
		if len(v) > shareMaxValue {
			t.Errorf("a string of %d bytes is remembered; at most %d should be", len(v), shareMaxValue)
		}
	}
	for k := range s.strs.prev {
		values, bytes = values+1, bytes+len(k)
	}
	for _, g := range []map[uint64]map[string]string{s.smaps.cur, s.smaps.prev} {
		for _, m := range g {
			values, bytes = values+1, bytes+len(m["note"])
		}
	}
	if values > 2*shareGeneration || bytes > 2*shareBytes {
		t.Errorf("%d values, %d bytes remembered; want at most %d and %d", values, bytes, 2*shareGeneration, 2*shareBytes)
	}
	if s.gen < 2 {
		t.Errorf("generation %d after %d unique Pods: the budget never turned", s.gen, 3*shareGeneration)
	}
}

// A Quantity a reader would make its string for (String, Size) has it made
// before it is shared, so no reader writes memory other objects hold.
func TestSharer_QuantityStringMadeBeforeSharing(t *testing.T) {
	s := newSharer[corev1.Pod]()
	pod := func() *corev1.Pod {
		q := resource.MustParse(string([]byte("2000m"))) // not canonical: no cached string yet
		return &corev1.Pod{Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "tmp",
			VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &q}}}}}}
	}
	a, b := pod(), pod()
	s.share(a)
	s.share(b)
	qa, qb := a.Spec.Volumes[0].EmptyDir.SizeLimit, b.Spec.Volumes[0].EmptyDir.SizeLimit
	if qa != qb {
		t.Fatalf("equal quantities not shared")
	}
	var readers sync.WaitGroup
	readers.Go(func() { _ = qa.String() })
	readers.Go(func() { _ = b.Size() }) // the race detector sees a write here if String was not made
	readers.Wait()
	if qa.String() != "2" {
		t.Errorf("SizeLimit = %s, want 2", qa.String())
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
	if p := newSharer[shareNothing]().plan; p != nil {
		t.Errorf("a type without exported strings, maps, pointers or slices has a plan: %+v", p)
	}
	s := newSharer[shareTree]()
	tree := func() *shareTree {
		return &shareTree{Name: string([]byte("root")), Kids: []shareTree{{Name: string([]byte("leaf")), n: string([]byte("hidden"))}},
			Next: &shareTree{Name: string([]byte("leaf"))}}
	}
	x, y := tree(), tree()
	s.share(x)
	s.share(y)
	if !sameString(x.Name, y.Name) || !sameString(x.Kids[0].Name, y.Next.Name) || sameString(x.Kids[0].n, y.Kids[0].n) {
		t.Errorf("recursive type: names shared %v %v, unexported shared %v",
			sameString(x.Name, y.Name), sameString(x.Kids[0].Name, y.Next.Name), sameString(x.Kids[0].n, y.Kids[0].n))
	}
}

// BenchmarkSharer_Pods is the cost of sharing 500 decoded realistic Pods
// (ns/op is per 500), the price the cache pays per stored object; decoding
// them (BenchmarkDecodePodList) costs about 3x more.
func BenchmarkSharer_Pods(b *testing.B) {
	var raws [][]byte
	for i := range 500 {
		raw, err := realisticPod(i).Marshal()
		if err != nil {
			b.Fatal(err)
		}
		raws = append(raws, raw)
	}
	s := newSharer[corev1.Pod]()
	pods := make([]corev1.Pod, len(raws))
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		for i, raw := range raws {
			pods[i] = corev1.Pod{}
			if err := pods[i].Unmarshal(raw); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		for i := range pods {
			s.share(&pods[i])
		}
	}
}

// Sharing never changes what an object says, and the Pods of one workload end
// up holding one copy of their containers, volumes and tolerations, while
// what differs (node, IP, image) stays their own. Readers of shared objects
// run meanwhile: the race detector sees any write to shared memory.
func TestSharer_KeepsContentAndSharesMemory(t *testing.T) {
	const n = 300
	var raws [][]byte
	for i := range n {
		p := realisticPod(i)
		p.Spec.Containers[0].Image = fmt.Sprintf("registry.example.com/shop/web:1.%d", i%3)
		if i%7 == 0 {
			p.Labels = map[string]string{"app": "web", "canary": "true"}
		}
		raw, err := p.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		raws = append(raws, raw)
	}
	decode := func(raw []byte) *corev1.Pod {
		p := new(corev1.Pod)
		if err := p.Unmarshal(raw); err != nil {
			t.Fatal(err)
		}
		return p
	}
	s := newSharer[corev1.Pod]()
	shared := make(chan *corev1.Pod, n)
	var readers sync.WaitGroup
	readers.Go(func() { // reads every shared Pod, as handlers and Get callers do
		for p := range shared {
			if _, err := p.DeepCopy().Marshal(); err != nil {
				t.Error(err)
			}
		}
	})
	pods := make([]*corev1.Pod, n)
	for i, raw := range raws {
		pods[i] = decode(raw)
		s.share(pods[i])
		shared <- pods[i]
	}
	close(shared)
	readers.Wait()
	containers, volumes := map[*corev1.Container]bool{}, map[*corev1.Volume]bool{}
	for i, p := range pods {
		got, err := p.Marshal()
		if err != nil || !bytes.Equal(got, raws[i]) {
			t.Fatalf("pod %d changed by sharing (err %v):\n%v\nwant\n%v", i, err, p, decode(raws[i]))
		}
		containers[&p.Spec.Containers[0]] = true
		volumes[&p.Spec.Volumes[0]] = true
		if i > 0 && sameString(p.Status.PodIP, pods[i-1].Status.PodIP) {
			t.Errorf("pods %d and %d share a PodIP", i-1, i)
		}
	}
	if len(containers) != 3 || len(volumes) != 1 {
		t.Errorf("%d pods hold %d copies of their containers (want 3: one per image) and %d of their volumes (want 1)",
			n, len(containers), len(volumes))
	}
	if c := &pods[0].Spec.Containers; cap(*c) != len(*c) {
		t.Errorf("a shared slice has spare capacity %d > %d: an append would write into other objects", cap(*c), len(*c))
	}
}
