package kctl

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
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
