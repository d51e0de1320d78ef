package kctltest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/internal/protowire"
	"github.com/kctl-dev/kctl/kctltest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// An informer over the in-memory server (protobuf, the watch-list stream)
// and a metadata-only one (PartialObjectMetadata in protobuf) follow
// changes; after the server drops every watch and compacts its history,
// they watch again, get 410 Gone, list again, and follow what changed
// meanwhile.
func TestInMemory_Informers_RelistAfterCompaction(t *testing.T) {
	env := kctltest.StartInMemory(t)
	ns := env.Namespace(t)
	ctx, cancel := context.WithCancel(t.Context())
	cache := kctl.NewCache(env.Conn, kctl.CacheOptions{Logger: kctltest.Logger(t), DefaultScope: kctl.Scope{Namespaces: []string{ns}}})
	pods, err := kctl.InformerFor[corev1.Pod](cache)
	if err != nil {
		t.Fatal(err)
	}
	metas, err := kctl.MetadataInformerFor[corev1.Pod](cache)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	pods.AddHandler(func(e kctl.Event[corev1.Pod]) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, fmt.Sprintf("%v %s", e.Type, e.Object.Name))
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		cache.Start(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	client := kctl.NewClient[corev1.Pod](env.Conn)
	create := func(name string) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "x"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}
		if err := client.Create(t.Context(), p); err != nil {
			t.Fatal(err)
		}
	}
	holds := func(step string, want ...string) {
		t.Helper()
		kctltest.Eventually(t, step, func() string {
			var got, gotMeta []string
			for _, p := range mustList(t, pods) {
				if p.Spec.Containers[0].Image != "i" {
					return "a Pod without its spec: " + p.Name
				}
				got = append(got, p.Name)
			}
			for _, p := range mustList(t, metas) {
				if p.Labels["app"] != "x" {
					return "a Pod's metadata without its labels: " + p.Name
				}
				gotMeta = append(gotMeta, p.Name)
			}
			slices.Sort(got)
			slices.Sort(gotMeta)
			if !slices.Equal(got, want) || !slices.Equal(gotMeta, want) {
				return fmt.Sprintf("Pods %v, metadata %v", got, gotMeta)
			}
			return ""
		})
	}
	create("a")
	create("b")
	holds("a and b cached", "a", "b")
	env.DropWatches(t)
	env.Compact(t)
	if err := client.Delete(t.Context(), ns, "a"); err != nil {
		t.Fatal(err)
	}
	env.Compact(t)
	create("c")
	holds("a deleted and c created while the watches were down, after a compaction", "b", "c")
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(seen, "Deleted a") || !slices.Contains(seen, "Added c") {
		t.Errorf("the handler saw %v; want a deleted and c added", seen)
	}
}

func mustList[T any](t *testing.T, inf *kctl.Informer[T]) []*T {
	t.Helper()
	list, err := inf.List(kctl.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// rawGet sends a GET with the given Accept header and returns the answer's
// Content-Type and body.
func rawGet(t *testing.T, env *kctltest.Env, path, accept string) (string, []byte) {
	cfg := env.Config()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(t.Context(), "GET", cfg.Host+path, nil)
	req.Header.Set("Accept", accept)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.Header.Get("Content-Type"), b
}

// A k8s.io/api object travels as protobuf when the client asks for it
// first, as JSON otherwise; a custom resource always as JSON.
func TestInMemory_Protobuf_ForK8sTypesWhenAskedFirst(t *testing.T) {
	env := kctltest.StartInMemory(t)
	cms := kctl.NewClient[corev1.ConfigMap](env.Conn)
	if err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "a"}, Data: map[string]string{"k": "v"}}); err != nil {
		t.Fatal(err)
	}
	ct, b := rawGet(t, env, "/api/v1/namespaces/default/configmaps/a", "application/vnd.kubernetes.protobuf, application/json")
	kind, raw, err := protowire.Unwrap(b)
	var cm corev1.ConfigMap
	if err == nil {
		err = cm.Unmarshal(raw)
	}
	if ct != "application/vnd.kubernetes.protobuf" || string(kind) != "ConfigMap" || err != nil || cm.Data["k"] != "v" {
		t.Errorf("GET a ConfigMap asking for protobuf: %s, kind %q, %v, data %v; want protobuf of the ConfigMap", ct, kind, err, cm.Data)
	}
	ct, b = rawGet(t, env, "/api/v1/namespaces/default/configmaps/a", "application/json")
	if ct != "application/json" || json.Unmarshal(b, &cm) != nil || cm.Data["k"] != "v" {
		t.Errorf("GET a ConfigMap asking for JSON: %s %s", ct, b)
	}
	ct, b = rawGet(t, env, "/api/v1/namespaces/default/configmaps", "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1")
	kind, raw, err = protowire.Unwrap(b)
	var list metav1.PartialObjectMetadataList
	if err == nil {
		err = list.Unmarshal(raw)
	}
	if string(kind) != "PartialObjectMetadataList" || err != nil || len(list.Items) != 1 || list.Items[0].Name != "a" {
		t.Errorf("a list of metadata in protobuf: %s, kind %q, %v, %+v", ct, kind, err, list.Items)
	}
}

// Discovery serves the k8s.io/api groups, a CRD's group once applied, and
// a type declared with kctl.Declare without any CRD.
func TestInMemory_Discovery_ServesCRDsAndDeclaredTypes(t *testing.T) {
	env := kctltest.StartInMemory(t)
	_, b := rawGet(t, env, "/apis", "application/json")
	if !strings.Contains(string(b), `"apps/v1"`) || !strings.Contains(string(b), `"coordination.k8s.io/v1"`) {
		t.Errorf("/apis lacks apps/v1 or coordination.k8s.io/v1: %.300s", b)
	}
	// gadget is declared (env_test.go): served before any CRD.
	gadgets := kctl.NewClient[gadget](env.Conn)
	g := &gadget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "a"}}
	if err := gadgets.Create(t.Context(), g); err != nil {
		t.Errorf("create a declared type without a CRD: %v", err)
	}
	env.Apply(t, []byte(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: things.example.com}
spec:
  group: example.com
  scope: Cluster
  names: {kind: Thing, listKind: ThingList, plural: things, singular: thing}
  versions:
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
`))
	_, b = rawGet(t, env, "/apis/example.com/v1", "application/json")
	var doc metav1.APIResourceList
	if json.Unmarshal(b, &doc) != nil || len(doc.APIResources) != 1 || doc.APIResources[0].Name != "things" || doc.APIResources[0].Namespaced {
		t.Errorf("discovery of example.com/v1 after applying its CRD: %s", b)
	}
	env.Apply(t, []byte("apiVersion: example.com/v1\nkind: Thing\nmetadata: {name: one}\nspec: {anything: [1, 2]}\n"))
	_, b = rawGet(t, env, "/apis/example.com/v1/things/one", "application/json")
	if !strings.Contains(string(b), `"anything":[1,2]`) {
		t.Errorf("a Thing applied from YAML: %s", b)
	}
}
