package kctl

import (
	"bytes"
	"io"
	"log/slog"
	"reflect"
	"testing"

	"github.com/kctl-dev/kctl/internal/podfixture"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// sameLimits says whether a's and b's first containers hold the same
// limits map, not just equal ones.
func sameLimits(a, b *corev1.Pod) bool {
	la := a.Spec.Containers[0].Resources.Limits
	lb := b.Spec.Containers[0].Resources.Limits
	return reflect.ValueOf(la).Pointer() == reflect.ValueOf(lb).Pointer()
}

// twoOfAWorkload returns two podfixture Pods of one workload: their
// containers' resources are equal.
func twoOfAWorkload(t *testing.T) (*corev1.Pod, *corev1.Pod) {
	t.Helper()
	a := podfixture.Pod("shop", 0)
	b := podfixture.Pod("shop", podfixture.Workloads)
	ra := a.Spec.Containers[0].Resources
	rb := b.Spec.Containers[0].Resources
	if len(ra.Limits) == 0 || !reflect.DeepEqual(ra, rb) {
		t.Fatalf("fixture: resources %v and %v, want equal limits", ra, rb)
	}
	return a, b
}

func podListBody(t *testing.T, pods ...*corev1.Pod) []byte {
	t.Helper()
	list := &corev1.PodList{}
	for _, p := range pods {
		list.Items = append(list.Items, *p)
	}
	raw, err := list.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return envelope("PodList", raw)
}

func TestCodec_InformersList_SharesEqualResourcesAndDecodesAsAClient(t *testing.T) {
	a, b := twoOfAWorkload(t)
	body := podListBody(t, a, b)
	client := podCodec()
	informer := podCodec()
	informer.reuse = true
	mine, _, _, err := client.decodeList(mediaProtobuf, body)
	if err != nil {
		t.Fatal(err)
	}
	shared, _, _, err := informer.decodeList(mediaProtobuf, body)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(shared, mine) {
		t.Fatal("the informer's list decodes otherwise than the client's")
	}
	if !sameLimits(shared[0], shared[1]) {
		t.Error("the informer's Pods hold two equal limits maps, want one")
	}
	if sameLimits(mine[0], mine[1]) {
		t.Error("a client's Pods share a map: a caller changing one changes the other")
	}
}

func TestWatchStream_Informers_SharesEqualResourcesOnlyUntilTheFirstBookmark(t *testing.T) {
	a, b := twoOfAWorkload(t)
	mark := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "7"}}
	var stream []byte
	for _, ev := range []struct {
		typ string
		pod *corev1.Pod
	}{{"ADDED", a}, {"ADDED", b}, {"BOOKMARK", mark}, {"MODIFIED", b}} {
		stream = append(stream, watchFrame(ev.typ, podProto(ev.pod))...)
	}
	c := podCodec()
	c.reuse = true
	w := newWatchStream(c, mediaProtobuf, io.NopCloser(bytes.NewReader(stream)))
	var pods []*corev1.Pod
	for range 4 {
		ev, err := w.Next()
		if err != nil || ev.Err != nil {
			t.Fatal(err, ev.Err)
		}
		pods = append(pods, ev.Object)
	}
	if !reflect.DeepEqual(pods[3].Spec, b.Spec) {
		t.Fatal("the Pod after the bookmark decodes otherwise")
	}
	if !sameLimits(pods[0], pods[1]) {
		t.Error("the Pods before the bookmark hold two equal limits maps, want one")
	}
	if sameLimits(pods[1], pods[3]) {
		t.Error("a Pod after the bookmark shares a map decoded before it")
	}
}

// A transform owns each object it is given (TransformFor), so an
// informer with one decodes every object's maps its own: the transform
// changing one Pod's limits leaves its workload's other Pod's alone.
func TestCache_TransformFor_ChangesOnlyTheObjectItIsGiven(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	conn := testProbeConn(t, cfg)
	a, b := twoOfAWorkload(t)
	pods := NewClient[corev1.Pod](conn)
	for _, p := range []*corev1.Pod{a, b} {
		p.Namespace = ns
		p.ResourceVersion = ""
		p.UID = ""
		if err := pods.Create(t.Context(), p); err != nil {
			t.Fatal(err)
		}
	}
	c := NewCache(conn, CacheOptions{Logger: slog.New(slog.DiscardHandler)})
	if err := ScopeFor[corev1.Pod](c, Scope{Namespaces: []string{ns}}); err != nil {
		t.Fatal(err)
	}
	err := TransformFor[corev1.Pod](c, func(p *corev1.Pod) {
		if p.Name == a.Name {
			clear(p.Spec.Containers[0].Resources.Limits)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	inf, err := InformerFor[corev1.Pod](c)
	if err != nil {
		t.Fatal(err)
	}
	startCache(t, c)
	eventually(t, "the sync", inf.HasSynced)
	got, ok := inf.Get(ns, b.Name)
	if !ok {
		t.Fatalf("%s is not cached", b.Name)
	}
	limits := got.Spec.Containers[0].Resources.Limits
	want := b.Spec.Containers[0].Resources.Limits
	if !reflect.DeepEqual(limits, want) {
		t.Errorf("%s's limits are %v after the transform changed %s's, want %v", b.Name, limits, a.Name, want)
	}
}
