package kctl

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

func TestInformerFault_KeepManagedFieldsAndTransform_AreApplied(t *testing.T) {
	checkNoCacheLeaks(t)
	f := newFakeAPI(t, func(c fakeCall) {
		if c.kind == "list" {
			a := cacheWidgetAt("a", "1", 1)
			a.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
			a.Annotations = map[string]string{"big": "x"}
			c.list("2", "", a)
			return
		}
		c.hang()
	})
	conn, _ := NewConn(&rest.Config{Host: f.url})
	c := NewCache(conn, CacheOptions{KeepManagedFields: true})
	if err := TransformFor(c, func(w *cacheWidget) { w.Annotations = nil }); err != nil {
		t.Fatal(err)
	}
	inf, _ := InformerFor[cacheWidget](c)
	if err := TransformFor(c, func(w *cacheWidget) {}); err == nil {
		t.Errorf("TransformFor after the informer was made succeeded")
	}
	if err := ScopeFor[cacheWidget](c, Scope{}); err == nil {
		t.Errorf("ScopeFor after the informer was made succeeded")
	}
	if again, _ := InformerFor[cacheWidget](c); again != inf {
		t.Errorf("InformerFor made a second informer for one type")
	}
	startCache(t, c)
	if err := inf.WaitForSync(cacheTestCtx(t)); err != nil {
		t.Fatal(err)
	}
	a, _ := inf.Get("default", "a")
	if len(a.ManagedFields) != 1 || a.Annotations != nil {
		t.Errorf("stored %+v: want managedFields kept and annotations cleared by the transform", a.ObjectMeta)
	}
}

func TestInformerFault_Namespaces_OneWatchEachIntoOneStore(t *testing.T) {
	checkNoCacheLeaks(t)
	f := newFakeAPI(t, func(c fakeCall) {
		ns := strings.Split(c.r.URL.Path, "/")[5] // /apis/group/v1/namespaces/NS/widgets
		switch {
		case c.kind == "list":
			w := cacheWidgetAt("w-"+ns, "1", 1)
			w.Namespace = ns
			c.list("1", "", w)
		default:
			c.hang()
		}
	})
	conn, _ := NewConn(&rest.Config{Host: f.url})
	c := NewCache(conn, CacheOptions{DefaultScope: Scope{Namespaces: []string{"b", "a", "b"}}})
	inf, _ := InformerFor[cacheWidget](c)
	startCache(t, c)
	if err := inf.WaitForSync(cacheTestCtx(t)); err != nil {
		t.Fatal(err)
	}
	if got := len(mustList(t, inf, ListOptions{})); got != 2 {
		t.Errorf("List() has %d objects, want 2 (one per namespace)", got)
	}
	if _, ok := inf.Get("b", "w-b"); !ok {
		t.Errorf("Get(b, w-b) found nothing")
	}
	eventually(t, "two watches", func() bool { return f.count("watch") == 2 })
	if f.count("list") != 2 {
		t.Errorf("requests %q: want one list and one watch per namespace", f.requests())
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := inf.waitForObject(ctx, "c", "x", "99"); err != nil {
		t.Errorf("waitForObject in namespace c, outside the scope = %v, want nil at once", err)
	}
}

func TestCache_ClientReadOfAnUnscopedType_WarnsNamingTheType(t *testing.T) {
	conn, _ := NewConn(&rest.Config{Host: "http://127.0.0.1:1"})
	logs, logger := newCacheLogs()
	c := NewCache(conn, CacheOptions{Logger: logger})
	if _, err := InformerFor[cacheWidget](c); err != nil {
		t.Fatal(err)
	}
	if w := logs.lines("WARN"); len(w) != 0 {
		t.Errorf("a controller's informer warned: %q", w)
	}
	c2 := NewCache(conn, CacheOptions{Logger: logger})
	if _, err := readInformer[cacheWidget](c2); err != nil {
		t.Fatal(err)
	}
	if w := logs.lines("WARN"); len(w) != 1 || !strings.Contains(w[0], "widgets.cachetest.kctl.dev/v1") {
		t.Errorf("want one warning naming widgets.cachetest.kctl.dev/v1, got %q", w)
	}
	c3 := NewCache(conn, CacheOptions{Logger: logger})
	ScopeFor[cacheWidget](c3, Scope{Namespaces: []string{"a"}})
	readInformer[cacheWidget](c3)
	if w := logs.lines("WARN"); len(w) != 1 {
		t.Errorf("a scoped type warned: %q", w)
	}
	type unknown struct{ metav1.ObjectMeta }
	if _, err := InformerFor[unknown](c); err == nil {
		t.Errorf("InformerFor an undeclared type succeeded")
	}
}

func TestCache_InformerMadeAfterStart_RunsAndStops(t *testing.T) {
	checkNoCacheLeaks(t)
	f := newFakeAPI(t, func(c fakeCall) {
		if c.kind == "list" {
			c.list("2", "", cacheWidgetAt("a", "1", 1))
			return
		}
		c.hang()
	})
	conn, _ := NewConn(&rest.Config{Host: f.url})
	c := NewCache(conn, CacheOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	eventually(t, "the cache to start", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.ctx != nil })
	if err := c.Start(ctx); err == nil {
		t.Errorf("a second Start succeeded")
	}
	inf, _ := InformerFor[cacheWidget](c)
	if err := inf.WaitForSync(cacheTestCtx(t)); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Start() = %v", err)
	}
	if err := inf.WaitForSync(cacheTestCtx(t)); err != nil {
		t.Errorf("WaitForSync after stop of a synced informer = %v", err)
	}
	if err := inf.Err(); err == nil || !strings.Contains(err.Error(), "stopped") {
		t.Errorf("Err() after stop = %v, want stopped", err)
	}
}
