package kctl

import (
	"context"
	"errors"
	"fmt"
	"github.com/kctl-dev/kctl/internal/index"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

func TestInformerFault_StoreReads_ReturnTheSharedObjects(t *testing.T) {
	checkNoCacheLeaks(t)
	f := newFakeAPI(t, func(c fakeCall) {
		if c.kind == "list" {
			a, b := cacheWidgetAt("a", "1", 1), cacheWidgetAt("b", "2", 2)
			a.Labels, b.Labels = map[string]string{"tier": "web"}, map[string]string{"tier": "db"}
			a.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
			c.list("2", "", a, b)
			return
		}
		c.hang()
	})
	inf, rec, _ := fakeInformer(t, f, CacheOptions{})
	if err := inf.AddIndex("size", func(w *cacheWidget) []string { return []string{fmt.Sprint(w.Spec.Size)} }); err != nil {
		t.Fatal(err)
	}
	if err := inf.AddIndex("size", func(w *cacheWidget) []string { return nil }); err == nil {
		t.Errorf("AddIndex accepted a second index named size")
	}
	if err := inf.WaitForSync(cacheTestCtx(t)); err != nil {
		t.Fatal(err)
	}
	a, ok := inf.Get("default", "a")
	if !ok {
		t.Fatal("Get(default, a) found nothing")
	}
	if a.ManagedFields != nil {
		t.Errorf("managedFields were stored: %v", a.ManagedFields)
	}
	web := mustList(t, inf, ListOptions{Namespace: "default", Labels: labels.SelectorFromSet(labels.Set{"tier": "web"})})
	bySize := inf.ByIndex("size", "1")
	eventually(t, "the initial events", func() bool { return len(rec.all()) == 2 })
	var fromEvent *cacheWidget
	for _, e := range rec.all() {
		if e.Object.Name == "a" {
			fromEvent = e.Object
		}
	}
	if len(web) != 1 || web[0] != a || len(bySize) != 1 || bySize[0] != a || fromEvent != a {
		t.Errorf("Get, List, ByIndex and the event do not share one stored object: %p %v %v %p", a, web, bySize, fromEvent)
	}
	if again, _ := inf.Get("default", "a"); again != a {
		t.Errorf("two Gets returned different pointers")
	}
	if got := mustList(t, inf, ListOptions{Namespace: "other"}); len(got) != 0 {
		t.Errorf("List(other) = %v, want nothing", got)
	}
	if got := inf.ByIndex("nope", "1"); got != nil {
		t.Errorf("ByIndex(unknown) = %v, want nil", got)
	}
	if n, b := inf.Stats(); n != 2 || b <= 0 {
		t.Errorf("Stats() = %d, %d; want 2 objects and some bytes", n, b)
	}
}

func TestInformerFault_WaitForResourceVersion_ReturnsOnceABookmarkPassesIt(t *testing.T) {
	checkNoCacheLeaks(t)
	bookmark := make(chan struct{})
	f := newFakeAPI(t, func(c fakeCall) {
		switch {
		case c.kind == "list":
			c.list("10", "", cacheWidgetAt("a", "9", 1))
		case c.n == 1:
			c.send("MODIFIED", cacheWidgetAt("a", "11", 2))
			select { // or the server's Close would wait for this handler forever after a failure
			case <-bookmark:
			case <-c.r.Context().Done():
				return
			}
			b := cacheWidgetAt("", "100", 0)
			c.send("BOOKMARK", b)
			c.hang()
		default:
			c.hang()
		}
	})
	inf, _, _ := fakeInformer(t, f, CacheOptions{})
	if err := inf.WaitForResourceVersion(cacheTestCtx(t), "11"); err != nil {
		t.Fatal(err)
	}
	a, _ := inf.Get("default", "a")
	if a.ResourceVersion != "11" {
		t.Errorf("after WaitForResourceVersion(11), a is at %s", a.ResourceVersion)
	}
	if err := inf.waitForObject(cacheTestCtx(t), "default", "a", "11"); err != nil {
		t.Errorf("waitForObject(a@11) = %v", err)
	}
	if err := inf.waitForObject(cacheTestCtx(t), "default", "never-stored", "11"); err != nil {
		t.Errorf("waitForObject(never-stored@11) = %v, want nil: the watch is at 11", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	err := inf.WaitForResourceVersion(ctx, "50")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitForResourceVersion(50) before the bookmark = %v, want the deadline", err)
	}
	close(bookmark)
	if err := inf.WaitForResourceVersion(cacheTestCtx(t), "50"); err != nil {
		t.Errorf("WaitForResourceVersion(50) after a bookmark at 100 = %v", err)
	}
	if err := inf.WaitForResourceVersion(cacheTestCtx(t), "x1"); err == nil {
		t.Errorf("WaitForResourceVersion(x1) accepted a malformed resourceVersion")
	}
}

// Lists by many new label keys at once build no more indexes than the bound,
// and each still returns what a scan would.
func TestInformer_List_ConcurrentIndexBuildsKeepTheBound(t *testing.T) {
	inf := &Informer[corev1.ConfigMap]{informer[*corev1.ConfigMap]{store: newStore[*corev1.ConfigMap]()}}
	lbls := map[string]string{}
	for k := range 40 {
		lbls[fmt.Sprint("k", k)] = "v"
	}
	for i := range 500 {
		inf.store.put(storeCM("ns", fmt.Sprint(i), "1", lbls))
	}
	for i := range index.MaxIndexes - 1 {
		if err := inf.AddIndex(fmt.Sprint("user", i), func(*corev1.ConfigMap) []string { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	var lists sync.WaitGroup
	start := make(chan struct{})
	for k := range 40 {
		lists.Go(func() {
			<-start
			if got, _ := inf.List(ListOptions{Labels: labels.SelectorFromSet(labels.Set{fmt.Sprint("k", k): "v"})}); len(got) != 500 {
				t.Errorf("List(k%d=v) = %d objects, want 500", k, len(got))
			}
		})
	}
	close(start)
	lists.Wait()
	if n := inf.store.indexes.Len(); n > index.MaxIndexes {
		t.Errorf("%d indexes, want at most %d", n, index.MaxIndexes)
	}
}
