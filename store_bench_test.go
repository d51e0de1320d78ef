package kctl

import (
	"fmt"
	"log/slog"
	"testing"

	"github.com/kctl-dev/kctl/internal/share"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// benchCMs is n ConfigMaps over 100 namespaces, at resourceVersion rv,
// labelled app=a0..a19.
func benchCMs(n int, rv string) []*corev1.ConfigMap {
	out := make([]*corev1.ConfigMap, n)
	for k := range out {
		ns := fmt.Sprint("ns-", k%100)
		app := map[string]string{"app": fmt.Sprint("a", k%20)}
		out[k] = storeCM(ns, fmt.Sprint("cm-", k), rv, app)
	}
	return out
}

// A relist of 10,000 ConfigMaps, every one changed, into a store that
// holds them: put, the indexes and the sweep of the unlisted.
func BenchmarkStore_Replace_10k(b *testing.B) {
	s := newStore[*corev1.ConfigMap]()
	s.labelIndex("app")
	lists := [][]*corev1.ConfigMap{benchCMs(10000, "1"), benchCMs(10000, "2")}
	changed := func(EventType, *corev1.ConfigMap, *corev1.ConfigMap) {}
	s.replace("", lists[0], nil, changed)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		n++
		s.replace("", lists[n%2], nil, changed)
	}
}

// A cached List by label of 500 of 10,000 ConfigMaps, from its index.
func BenchmarkStore_ListByLabel_10k(b *testing.B) {
	s := newStore[*corev1.ConfigMap]()
	changed := func(EventType, *corev1.ConfigMap, *corev1.ConfigMap) {}
	s.replace("", benchCMs(10000, "1"), nil, changed)
	sel := labels.SelectorFromSet(labels.Set{"app": "a3"})
	storeList(s, "", sel)
	b.ReportAllocs()
	for b.Loop() {
		if got := storeList(s, "", sel); len(got) != 500 {
			b.Fatal(len(got))
		}
	}
}

// A watch's MODIFIED event applied to an informer of 1,000 ConfigMaps:
// transform, share, put and the events to one handler.
func BenchmarkInformer_Apply(b *testing.B) {
	inf := &Informer[corev1.ConfigMap]{informer[*corev1.ConfigMap]{
		store:     newStore[*corev1.ConfigMap](),
		transform: func(*corev1.ConfigMap) {},
		sharer:    share.New((*corev1.ConfigMap)(nil)),
		log:       slog.New(slog.DiscardHandler),
	}}
	inf.handlers = []*handler[*corev1.ConfigMap]{{wake: make(chan struct{}, 1)}}
	w := &watchState{synced: true}
	inf.watches = []*watchState{w}
	lists := [][]*corev1.ConfigMap{benchCMs(1000, "1"), benchCMs(1000, "2")}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		n++
		list := lists[n/1000%2]
		e := watchEvent[*corev1.ConfigMap]{Type: "MODIFIED", Object: list[n%1000]}
		if err := inf.apply(w, e); err != nil {
			b.Fatal(err)
		}
		if n%1000 == 0 {
			inf.handlers[0].pending = nil
		}
	}
}
