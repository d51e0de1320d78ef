package kctl

import (
	"bytes"
	"fmt"
	"reflect"
	"runtime"
	"strings"
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

// shareWarm shares n objects made by mk, so that the parts they have in
// common are remembered (a part is remembered when it is seen again, and a
// part holding other parts only once those are shared).
func shareWarm[T any](s *sharer, n int, mk func() *T) {
	for range n {
		s.share(mk())
	}
}

func TestSharer_SharesEqualPartsOnly(t *testing.T) {
	s := newSharer[corev1.Pod]()
	shareWarm(s, 4, func() *corev1.Pod { return sharePod("pod-a", "web:1") })
	a, b, c := sharePod("pod-a", "web:1"), sharePod("pod-b", "web:1"), sharePod("pod-c", "web:2")
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
		{"a and b share the containers", &a.Spec.Containers[0] == &b.Spec.Containers[0], true},
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
	a2 := sharePod("pod-a", "web:1")
	s.share(a2)
	if a.Name != "pod-a" || sameString(a.Name, a2.Name) {
		t.Errorf("names must be left alone: %q, shared with the next object of that name: %v", a.Name, sameString(a.Name, a2.Name))
	}
}

// Regression (issue 15, item 14): one ConfigMap updated 4,000 times, each
// time with 16 KiB of fresh values, pinned 63 MiB (all of its old versions'
// data) against a promised 8. The sharer keeps nothing alive: after churn,
// what it holds is its own tables, under 1 MiB.
func TestSharer_ChurnPinsNothing(t *testing.T) {
	s := newSharer[corev1.ConfigMap]()
	var current *corev1.ConfigMap // the cache keeps the latest version only
	before := liveHeap()
	for i := range 4000 {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "churn", ResourceVersion: fmt.Sprint(i),
				Labels: map[string]string{"app": "churn"}, Annotations: map[string]string{"updated": fmt.Sprint(i)}},
			Data: map[string]string{},
		}
		for k := range 4 {
			cm.Data[fmt.Sprint("key-", k)] = fmt.Sprintf("%04d-%d-%s", i, k, strings.Repeat("x", 4090))
		}
		current = shareDecoded(t, s, cm)
	}
	after := liveHeap()
	runtime.KeepAlive(current)
	runtime.KeepAlive(s)
	pinned := int64(after) - int64(before)
	t.Logf("the heap grew by %d bytes", pinned)
	if pinned > 1<<20 {
		t.Errorf("after 4000 updates of one ConfigMap with fresh values, the heap grew by %.1f MiB, want at most 1 MiB",
			float64(pinned)/(1<<20))
	}
}

// shareDecoded shares a decoded copy of obj, in memory of its own as the cache gets it.
func shareDecoded[T any, PT interface {
	*T
	protoObject
}](t *testing.T, s *sharer, obj PT) PT {
	raw, err := obj.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	decoded := PT(new(T))
	if err := decoded.Unmarshal(raw); err != nil {
		t.Fatal(err)
	}
	s.share(decoded)
	return decoded
}

// Regression (issue 15, item 14): a soak of 2,000 ConfigMaps updated at
// 100/s showed the live heap growing from 3.1 to 11.6 MiB in 3 minutes,
// decoded metadata kept for sharing. Here the 18,000 updates of 3 minutes
// come at once: after the first third, the live heap stays within 10%, and
// the sharer's own memory is a small part of the cache's.
func TestSharer_SoakStaysFlat(t *testing.T) {
	const objects, updates = 2000, 18000
	s := newSharer[corev1.ConfigMap]()
	cache := make(map[int]*corev1.ConfigMap, objects)
	configMap := func(n, version int) *corev1.ConfigMap {
		return &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "soak", Name: fmt.Sprint("config-", n), ResourceVersion: fmt.Sprint(version),
				Labels:      map[string]string{"app": fmt.Sprint("app-", n%20), "team": "soak"},
				Annotations: map[string]string{"example.com/updated": fmt.Sprint(version), "example.com/owner": "soak"}},
			Data: map[string]string{"config.yaml": fmt.Sprintf("app: app-%d\nreplicas: 3\n%s", n%20, strings.Repeat("# setting\n", 100)),
				"version": fmt.Sprint(version)},
		}
	}
	before := liveHeap()
	var heaps []uint64
	for i := range updates {
		n := i * 7919 % objects
		cache[n] = shareDecoded(t, s, configMap(n, i))
		if (i+1)%(updates/3) == 0 {
			heaps = append(heaps, liveHeap()-before)
		}
	}
	withSharer := liveHeap()
	runtime.KeepAlive(s)
	own := int64(withSharer) - int64(liveHeap()) // the sharer is garbage now
	runtime.KeepAlive(cache)
	t.Logf("live heap after each minute: %v; the sharer's own: %d", heaps, own)
	for i, h := range heaps[1:] {
		if h > heaps[0]*11/10 || h < heaps[0]*9/10 {
			t.Errorf("live heap after minute %d: %d bytes, after the first: %d; want within 10%%", i+2, h, heaps[0])
		}
	}
	if cacheBytes := int64(heaps[2]) - own; own > cacheBytes/4 {
		t.Errorf("the sharer holds %d bytes, the cache %d; want at most a quarter", own, cacheBytes)
	}
}

// Regression (issue 15, item 14): whether two equal Quantities shared
// depended on the padding bytes after their scale, which nothing sets, and
// the test below failed in about half of the runs. Here the padding of one is
// dirty on purpose.
func TestSharer_QuantityPaddingDoesNotMatter(t *testing.T) {
	i, _ := reflect.TypeFor[resource.Quantity]().FieldByName("i")
	last := i.Type.Field(i.Type.NumField() - 1)
	pad := i.Offset + last.Offset + last.Type.Size()
	if pad >= i.Offset+i.Type.Size() {
		t.Skip("resource.Quantity has no padding after its scale in this version")
	}
	s := newSharer[corev1.Pod]()
	pod := func() *corev1.Pod {
		q := resource.MustParse(string([]byte("64Mi")))
		return &corev1.Pod{Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "tmp",
			VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &q}}}}}}
	}
	shareWarm(s, 3, pod)
	a, b := pod(), pod()
	*(*byte)(unsafe.Add(unsafe.Pointer(b.Spec.Volumes[0].EmptyDir.SizeLimit), pad)) = 0xff
	s.share(a)
	s.share(b)
	if qa, qb := a.Spec.Volumes[0].EmptyDir.SizeLimit, b.Spec.Volumes[0].EmptyDir.SizeLimit; qa != qb || qb.String() != "64Mi" {
		t.Errorf("equal quantities, one with dirty padding: shared %v, %s", qa == qb, qb.String())
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
	shareWarm(s, 3, pod)
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

var shareDefaultMode = int32(420)

// What an object holds need not be on the heap (a transform may set a string
// constant or a pointer to a variable); such parts share like any other, and
// the constant and the variable are never written.
func TestSharer_SharesConstantsAndVariables(t *testing.T) {
	s := newSharer[corev1.Pod]()
	pod := func() *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "constant"}, Spec: corev1.PodSpec{Volumes: []corev1.Volume{{
			Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{DefaultMode: &shareDefaultMode}}}}}}
	}
	var pods []*corev1.Pod
	for range 5 {
		pods = append(pods, pod())
		s.share(pods[len(pods)-1])
		runtime.GC()
	}
	a, b := pods[3], pods[4]
	if !sameString(a.Namespace, b.Namespace) || &a.Spec.Volumes[0] != &b.Spec.Volumes[0] {
		t.Errorf("equal parts not shared: namespace %v, volumes %v", sameString(a.Namespace, b.Namespace), &a.Spec.Volumes[0] == &b.Spec.Volumes[0])
	}
	if b.Namespace != "constant" || *b.Spec.Volumes[0].ConfigMap.DefaultMode != 420 || shareDefaultMode != 420 {
		t.Errorf("sharing changed content: %q, mode %d, variable %d", b.Namespace, *b.Spec.Volumes[0].ConfigMap.DefaultMode, shareDefaultMode)
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
	shareWarm(s, 3, tree)
	x, y := tree(), tree()
	s.share(x)
	s.share(y)
	if !sameString(x.Name, y.Name) || !sameString(x.Kids[0].Name, y.Next.Name) || sameString(x.Kids[0].n, y.Kids[0].n) || x.Next != y.Next {
		t.Errorf("recursive type: names shared %v %v, unexported shared %v, Next shared %v",
			sameString(x.Name, y.Name), sameString(x.Kids[0].Name, y.Next.Name), sameString(x.Kids[0].n, y.Kids[0].n), x.Next == y.Next)
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
// run meanwhile: the race detector sees any write to shared memory; and
// collections run, which free the copies of Pods no longer held.
func TestSharer_KeepsContentAndSharesMemory(t *testing.T) {
	const n, warm = 300, 30
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
		if i%50 == 0 {
			s.share(decode(raws[i])) // a Pod deleted at once: its parts are freed below
			runtime.GC()
		}
	}
	close(shared)
	readers.Wait()
	containers, volumes := map[*corev1.Container]bool{}, map[*corev1.Volume]bool{}
	for i, p := range pods {
		got, err := p.Marshal()
		if err != nil || !bytes.Equal(got, raws[i]) {
			t.Fatalf("pod %d changed by sharing (err %v):\n%v\nwant\n%v", i, err, p, decode(raws[i]))
		}
		if i >= warm {
			containers[&p.Spec.Containers[0]] = true
			volumes[&p.Spec.Volumes[0]] = true
		}
		if i > 0 && sameString(p.Status.PodIP, pods[i-1].Status.PodIP) {
			t.Errorf("pods %d and %d share a PodIP", i-1, i)
		}
	}
	if len(containers) != 3 || len(volumes) != 1 {
		t.Errorf("pods %d to %d hold %d copies of their containers (want 3: one per image) and %d of their volumes (want 1)",
			warm, n-1, len(containers), len(volumes))
	}
	if c := &pods[n-1].Spec.Containers; cap(*c) != len(*c) {
		t.Errorf("a shared slice has spare capacity %d > %d: an append would write into other objects", cap(*c), len(*c))
	}
}

// Regression (issue 15, item 14), against the real API server: a cache of one
// ConfigMap updated 600 times with 16 KiB of fresh values each time (9.4 MiB
// in all) pinned every old version's data; now the heap after the churn is
// within 2 MiB of where it was.
func TestInformer_ConfigMapChurn_PinsNothing(t *testing.T) {
	checkNoCacheLeaks(t)
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	conn, err := NewConn(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cms := NewClient[corev1.ConfigMap](conn)
	cm := newCM(ns, "churn", "0")
	if err := cms.Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	c := NewCache(conn, CacheOptions{})
	if err := ScopeFor[corev1.ConfigMap](c, Scope{Namespaces: []string{ns}}); err != nil {
		t.Fatal(err)
	}
	inf, err := InformerFor[corev1.ConfigMap](c)
	if err != nil {
		t.Fatal(err)
	}
	startCache(t, c)
	if err := inf.WaitForSync(cacheTestCtx(t)); err != nil {
		t.Fatal(err)
	}
	update := func(i int) {
		t.Helper()
		cm.Data = map[string]string{"v": fmt.Sprintf("%04d-%s", i, strings.Repeat("x", 16<<10))}
		if err := cms.Update(t.Context(), cm); err != nil {
			t.Fatal(err)
		}
	}
	cached := func(i int) func() bool {
		return func() bool {
			got, ok := inf.Get(ns, "churn")
			return ok && strings.HasPrefix(got.Data["v"], fmt.Sprintf("%04d-", i))
		}
	}
	update(0) // the connection's buffers, the watch's first event
	eventually(t, "the first update cached", cached(0))
	before := liveHeap()
	for i := 1; i <= 600; i++ {
		update(i)
	}
	eventually(t, "the last update cached", cached(600))
	grew := int64(liveHeap()) - int64(before)
	t.Logf("the live heap grew by %d bytes", grew)
	if grew > 2<<20 {
		t.Errorf("after 600 updates of 16 KiB fresh values, the live heap grew by %.1f MiB; want at most 2", float64(grew)/(1<<20))
	}
}
