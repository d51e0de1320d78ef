package kctl

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// A metadata informer and a full informer of ConfigMaps run side by side in
// one cache, on the real server: the metadata one asks for
// PartialObjectMetadata (lists, the watch-list stream, watches), holds each
// object's metadata with T's apiVersion and kind, and follows updates and
// deletes; the full one holds the data. Both through the watch-list stream
// and, where the server refuses it, through a paged list and a watch.
func TestMetadataInformer_BesideAFullOne_HoldsMetadataAndFollowsChanges(t *testing.T) {
	for _, mode := range []string{"stream", "paged"} {
		t.Run(mode, func(t *testing.T) {
			checkNoCacheLeaks(t)
			direct := testConfig(t)
			ns := testNamespace(t, direct)
			cfg := rest.CopyConfig(direct)
			if mode == "paged" {
				cfg = watchListRefusingProxy(t, direct)
			}
			var mu sync.Mutex
			var accepts []string
			cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
				return partitionRoundTrip(func(r *http.Request) (*http.Response, error) {
					if strings.HasSuffix(r.URL.Path, "/configmaps") {
						mu.Lock()
						accepts = append(accepts, r.Header.Get("Accept"))
						mu.Unlock()
					}
					return rt.RoundTrip(r)
				})
			})
			cms := NewClient[corev1.ConfigMap](mustConn(t, direct))
			for i := range 3 {
				cm := newCM(ns, fmt.Sprint("cm-", i), strings.Repeat("x", 1000))
				cm.Labels = map[string]string{"app": "web"}
				if err := cms.Create(t.Context(), cm); err != nil {
					t.Fatal(err)
				}
			}
			c := NewCache(mustConn(t, cfg), CacheOptions{})
			if err := ScopeFor[corev1.ConfigMap](c, Scope{Namespaces: []string{ns}}); err != nil {
				t.Fatal(err)
			}
			metas, err := MetadataInformerFor[corev1.ConfigMap](c)
			if err != nil {
				t.Fatal(err)
			}
			again, _ := MetadataInformerFor[corev1.ConfigMap](c)
			full, err := InformerFor[corev1.ConfigMap](c)
			if err != nil {
				t.Fatal(err)
			}
			if again != metas || any(full) == any(metas) {
				t.Fatal("want one metadata informer per type, apart from the full one")
			}
			startCache(t, c)
			ctx := cacheTestCtx(t)
			for _, wait := range []func(context.Context) error{metas.WaitForSync, full.WaitForSync} {
				if err := wait(ctx); err != nil {
					t.Fatal(err)
				}
			}
			m, ok := metas.Get(ns, "cm-1")
			if !ok || m.Labels["app"] != "web" || m.APIVersion != "v1" || m.Kind != "ConfigMap" || m.ResourceVersion == "" {
				t.Fatalf("metadata of cm-1 = %+v, %v; want its labels, resourceVersion, apiVersion v1 and kind ConfigMap", m, ok)
			}
			if m.ManagedFields != nil {
				t.Errorf("metadata of cm-1 keeps managedFields")
			}
			if f, _ := full.Get(ns, "cm-1"); f == nil || len(f.Data["v"]) != 1000 {
				t.Errorf("the full informer's cm-1 = %+v, want its data", f)
			}
			cm, err := cms.Get(t.Context(), ns, "cm-1")
			if err != nil {
				t.Fatal(err)
			}
			cm.Labels["app"] = "db"
			if err := cms.Update(t.Context(), cm); err != nil {
				t.Fatal(err)
			}
			if err := cms.Delete(t.Context(), ns, "cm-2"); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the update and the delete in the metadata", func() bool {
				m, _ := metas.Get(ns, "cm-1")
				_, stillThere := metas.Get(ns, "cm-2")
				return m != nil && m.Labels["app"] == "db" && !stillThere
			})
			mu.Lock()
			defer mu.Unlock()
			var asMeta, asFull int
			for _, a := range accepts {
				if strings.Contains(a, "as=PartialObjectMetadata") {
					asMeta++
				} else {
					asFull++
				}
			}
			if asMeta < 1 || asFull < 1 {
				t.Errorf("Accept headers %q: want the metadata informer's asking for PartialObjectMetadata and the full one's not", accepts)
			}
		})
	}
}

// A controller that owns Pods as metadata only, on the real server: a
// child's change enqueues its owner, the reconcile counts the owner's Pods
// from their metadata, the cache holds no whole Pod, and a cached read of
// a whole Pod is an error naming the fix (matching ErrNotCached), never a
// Pod with its metadata only.
func TestController_OwnsMetadata_ChildChangeEnqueuesOwnerAndWholeReadsFail(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	pods := ClientFor[corev1.Pod](mgr)
	metas, err := MetadataInformerFor[corev1.Pod](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	var log reconcileLog
	var mu sync.Mutex
	counts := map[string]int{}
	var readErr error
	c := NewController(mgr, "owns-metadata", func(ctx context.Context, rs *appsv1.ReplicaSet) (Result, error) {
		defer log.record(ctx, Key{rs.Namespace, rs.Name})()
		children, err := metas.List(ListOptions{Namespace: rs.Namespace})
		if err != nil {
			return Result{}, err
		}
		n := 0
		for _, p := range children {
			ref := metav1.GetControllerOf(p)
			if ref != nil && ref.UID == rs.UID {
				n++
			}
		}
		_, getErr := pods.Get(ctx, rs.Namespace, "child-0")
		mu.Lock()
		counts[rs.Name] = n
		readErr = getErr
		mu.Unlock()
		return Result{}, nil
	})
	OwnsMetadata[corev1.Pod](c)
	startManager(t, mgr)
	ctx := t.Context()
	rs := testReplicaSet(ns, "rs")
	if err := NewClient[appsv1.ReplicaSet](mgr.conn).Create(ctx, rs); err != nil {
		t.Fatal(err)
	}
	// Children made after it are seen live, not merged into its first reconcile.
	eventually(t, "the ReplicaSet reconciled once", func() bool { return len(log.causes(ns+"/rs")) > 0 })
	direct := NewClient[corev1.Pod](mgr.conn)
	for _, name := range []string{"child-0", "child-1"} {
		if err := direct.Create(ctx, ownedPod(rs, name)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the ReplicaSet reconciled for its children, counting both", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return log.saw(ns+"/rs", "owned") && counts["rs"] == 2
	})
	mu.Lock()
	err = readErr
	mu.Unlock()
	if !errors.Is(err, ErrNotCached) || !strings.Contains(err.Error(), "metadata only") || !strings.Contains(err.Error(), "Uncached()") {
		t.Errorf("a cached Get of a Pod held as metadata only: %v; want ErrNotCached naming the fix (Uncached(), Owns)", err)
	}
	if _, err := pods.List(ctx, ListOptions{Namespace: ns}); !errors.Is(err, ErrNotCached) {
		t.Errorf("a cached List of Pods held as metadata only: %v; want ErrNotCached", err)
	}
	if p, err := pods.Uncached().Get(ctx, ns, "child-0"); err != nil || len(p.Spec.Containers) != 1 {
		t.Errorf("an uncached Get: %v, %v; want the whole Pod", p, err)
	}
	mgr.Cache().mu.Lock()
	_, whole := mgr.Cache().informers[mustResource[corev1.Pod](t)]
	mgr.Cache().mu.Unlock()
	if whole {
		t.Error("the cache made an informer of whole Pods")
	}
	// A change to a child enqueues its owner again.
	before := len(log.causes(ns + "/rs"))
	p, err := direct.Get(ctx, ns, "child-1")
	if err != nil {
		t.Fatal(err)
	}
	p.Labels["touched"] = "yes"
	if err := direct.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the child's update reconciles its owner", func() bool {
		log.mu.Lock()
		defer log.mu.Unlock()
		trs := log.triggers[ns+"/rs"]
		if len(trs) <= before {
			return false
		}
		// any reconcile since: a wait the update's event cut short runs as
		// "delayed" right after it
		return slices.ContainsFunc(trs[before:], func(t Trigger) bool {
			return t.Cause == "owned" && strings.HasPrefix(t.Detail, "Pod "+ns+"/child-1")
		})
	})
}

// A metadata-only and a whole informer of one type coexist: one controller
// owns ConfigMaps as metadata, another owns them whole, and cached reads
// get whole ConfigMaps (from the whole informer) while the metadata
// informer holds their metadata.
func TestCache_MetadataAndWholeInformersCoexist_WholeServesReads(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	noop := func(ctx context.Context, rs *appsv1.ReplicaSet) (Result, error) { return Result{}, nil }
	OwnsMetadata[corev1.ConfigMap](NewController(mgr, "metadata", noop))
	Owns[corev1.ConfigMap](NewController(mgr, "whole", noop))
	if err := ScopeFor[corev1.ConfigMap](mgr.Cache(), Scope{}); err == nil || !strings.Contains(err.Error(), "already made") {
		t.Errorf("ScopeFor after the informers are made: %v; want an error", err)
	}
	startManager(t, mgr)
	ctx := t.Context()
	cms := ClientFor[corev1.ConfigMap](mgr)
	cm := newCM(ns, "cm", "whole")
	if err := cms.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	got, err := cms.Get(ctx, ns, "cm") // waits for the write (read-your-writes)
	if err != nil || got.Data["v"] != "whole" {
		t.Fatalf("a cached Get: %+v, %v; want the whole ConfigMap", got, err)
	}
	metas, err := MetadataInformerFor[corev1.ConfigMap](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the metadata informer holds the ConfigMap", func() bool {
		m, ok := metas.Get(ns, "cm")
		return ok && m.UID == got.UID
	})

	// Each informer is on the metrics page once, under names of its own.
	body := scrapeMetrics(t, mgr.metrics.Handler())
	page := samples(body)
	const r = `{resource="configmaps/v1"}`
	for _, family := range []string{"kctl_cache_objects", "kctl_cache_metadata_objects"} {
		if got := page[family+r]; got != "1" {
			t.Errorf("%s%s = %q, want 1 (the ConfigMap)", family, r, got)
		}
		if n := strings.Count(body, "\n"+family+r+" "); n != 1 {
			t.Errorf("%s%s is on the page %d times, want once:\n%s", family, r, n, body)
		}
	}
	if got := value(t, page, "kctl_cache_metadata_bytes"+r); got <= 0 {
		t.Errorf("kctl_cache_metadata_bytes%s = %v, want the encoded size of its metadata", r, got)
	}
}

// Before any informer is made, MetadataInformerFor takes T's scope, and
// configuring T after it is an error, as for a whole informer.
func TestMetadataInformer_TakesTheScopeAndFixesIt(t *testing.T) {
	c := NewCache(nil, CacheOptions{})
	if err := ScopeFor[corev1.Secret](c, Scope{Namespaces: []string{"b", "a"}}); err != nil {
		t.Fatal(err)
	}
	inf, err := MetadataInformerFor[corev1.Secret](c)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range inf.watches {
		got = append(got, w.opts.Namespace)
	}
	if strings.Join(got, ",") != "a,b" {
		t.Errorf("watched namespaces %q, want a,b", got)
	}
	err = TransformFor(c, func(*corev1.Secret) {})
	if err == nil || !strings.Contains(err.Error(), "already made") {
		t.Errorf("TransformFor after the metadata informer: %v; want an error", err)
	}
}

func mustResource[T any](t *testing.T) Resource {
	t.Helper()
	res, err := ResourceOf[T]()
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// WatchesMetadata maps the metadata of a watched type to keys: a Secret
// annotated with a ReplicaSet's name enqueues it, the mapping sees the
// Secret's annotations, and the cache holds no Secret data.
func TestController_WatchesMetadata_MapsMetadataToKeys(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	var log reconcileLog
	c := NewController(mgr, "watches-metadata", func(ctx context.Context, rs *appsv1.ReplicaSet) (Result, error) {
		defer log.record(ctx, Key{rs.Namespace, rs.Name})()
		return Result{}, nil
	})
	WatchesMetadata[corev1.Secret](c, func(s *metav1.PartialObjectMetadata) []Key {
		if name := s.Annotations["example.com/for"]; name != "" {
			return []Key{{s.Namespace, name}}
		}
		return nil
	})
	startManager(t, mgr)
	ctx := t.Context()
	if err := NewClient[appsv1.ReplicaSet](mgr.conn).Create(ctx, testReplicaSet(ns, "rs")); err != nil {
		t.Fatal(err)
	}
	// A Secret made after it is seen live, not merged into its first reconcile.
	eventually(t, "the ReplicaSet reconciled once", func() bool { return len(log.causes(ns+"/rs")) > 0 })
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s", Annotations: map[string]string{"example.com/for": "rs"}},
		Data:       map[string][]byte{"key": []byte("value")},
	}
	if err := NewClient[corev1.Secret](mgr.conn).Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Secret's metadata enqueues the ReplicaSet", func() bool { return log.saw(ns+"/rs", "mapped") })
	if _, err := ClientFor[corev1.Secret](mgr).Get(ctx, ns, "s"); !errors.Is(err, ErrNotCached) {
		t.Errorf("a cached Get of a Secret held as metadata only: %v; want ErrNotCached", err)
	}
}

// OwnsMetadata on a controller of keys, whose keys have no kind for an
// owner reference to match, is a builder mistake returned by Start.
func TestController_OwnsMetadataOnAKeyController_IsAMistake(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	c := NewKeyController(mgr, "keys", func(ctx context.Context, k Key) (Result, error) { return Result{}, nil })
	OwnsMetadata[corev1.Pod](c)
	err := mgr.Start(t.Context())
	if err == nil || !strings.Contains(err.Error(), "OwnsMetadata") {
		t.Errorf("Start: %v; want the OwnsMetadata mistake", err)
	}
}
