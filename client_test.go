package kctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
)

// fakeServer serves handler over HTTP and returns a Conn to it. It answers
// the discovery documents of declared types itself (fakeDiscovery).
func fakeServer(t *testing.T, handler http.HandlerFunc) *Conn {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !fakeDiscovery(w, r) {
			handler(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	conn, err := NewConn(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

func clientTestConn(t *testing.T, cfg *rest.Config) *Conn {
	t.Helper()
	conn, err := NewConn(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

func TestClient_FaultInjection_TruncatedProtobuf_IsAnError(t *testing.T) {
	pb, _ := podListBodies(3)
	pod := podProto(realisticPod(1))
	conn := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", mediaProtobuf)
		if r.URL.Path == "/api/v1/namespaces/shop/pods" {
			w.Write(pb[:len(pb)-7])
			return
		}
		w.Write(pod[:len(pod)/2])
	})
	pods := NewClient[corev1.Pod](conn)
	if _, err := pods.Get(t.Context(), "shop", "web"); err == nil {
		t.Error("Get of a truncated protobuf pod: no error")
	}
	if _, err := pods.List(t.Context(), ListOptions{Namespace: "shop"}); err == nil {
		t.Error("List of a truncated protobuf list: no error")
	}
}

// podPage is a protobuf page of pods as the API server sends it: each item
// is the raw protobuf of one pod (badPodProto for an undecodable one).
func podPage(rv, next string, items ...[]byte) []byte {
	meta, _ := (&metav1.ListMeta{ResourceVersion: rv, Continue: next}).Marshal()
	list := protowire(1, meta)
	for _, item := range items {
		list = append(list, protowire(2, item)...)
	}
	return envelope("PodList", list)
}

func rawPod(i int) []byte {
	b, err := realisticPod(i).Marshal()
	if err != nil {
		panic(err)
	}
	return b
}

func TestClient_FaultInjection_ListWithUndecodableObjects_ReturnsTheOthersAndAnErrorNamingThem(t *testing.T) {
	conn := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "/gizmos") {
			w.Header().Set("Content-Type", mediaJSON)
			w.Write([]byte(`{"metadata":{},"items":[{"metadata":{"name":"a","namespace":"shop"}},` +
				`{"metadata":{"name":"bad","namespace":"shop"},"spec":{"tags":"not-a-list"}}]}`))
			return
		}
		w.Header().Set("Content-Type", mediaProtobuf)
		if r.URL.Query().Get("continue") == "" { // two pages, a bad pod in each
			w.Write(podPage("9", "p2", rawPod(0), badPodProto("shop", "broken-1"), rawPod(1)))
		} else {
			w.Write(podPage("9", "", badPodProto("shop", "broken-2"), rawPod(2)))
		}
	})
	pods, err := NewClient[corev1.Pod](conn).List(t.Context(), ListOptions{Namespace: "shop"})
	if len(pods) != 3 || pods[2].Name != realisticPod(2).Name || pods[2].Kind != "Pod" {
		t.Errorf("List of pods = %d items; want the 3 good ones", len(pods))
	}
	if err == nil || !strings.Contains(err.Error(), "left out 2 object(s)") ||
		!strings.Contains(err.Error(), "shop/broken-1") || !strings.Contains(err.Error(), "shop/broken-2") {
		t.Errorf("List of pods: err = %v, want one naming shop/broken-1 and shop/broken-2", err)
	}
	gizmos, err := NewClient[gizmo](conn).List(t.Context(), ListOptions{Namespace: "shop"})
	if len(gizmos) != 1 || gizmos[0].Name != "a" || err == nil || !strings.Contains(err.Error(), "shop/bad") {
		t.Errorf("List of gizmos = %d items, %v; want gizmo a and an error naming shop/bad", len(gizmos), err)
	}
}

func TestInformerFault_ListWithAnUndecodableObject_SyncsTheOthersAndLogsIt(t *testing.T) {
	checkNoCacheLeaks(t)
	f := newFakeAPI(t, func(c fakeCall) {
		if c.kind == "watch" {
			c.hang()
			return
		}
		c.w.Header().Set("Content-Type", "application/json")
		c.w.Write([]byte(`{"metadata":{"resourceVersion":"5"},"items":[{"metadata":{"name":"a","namespace":"default","resourceVersion":"3"}},` +
			`{"metadata":{"name":"bad","namespace":"default"},"spec":{"size":"huge"}}]}`))
	})
	inf, rec, logs := fakeInformer(t, f, CacheOptions{})
	if err := inf.WaitForSync(cacheTestCtx(t)); err != nil {
		t.Fatal(err)
	}
	wantEvents(t, rec, "Added a@3 initial")
	if l := logs.lines("could not decode"); len(l) != 1 || !strings.Contains(l[0], "default/bad") {
		t.Errorf("want one log line naming default/bad, got:\n%s", logs)
	}
	if f.count("list") != 1 {
		t.Errorf("%d lists, want 1: an undecodable object must not fail the list", f.count("list"))
	}
}

func TestInformerFault_ProtobufPods_StoredWithoutManagedFieldsAndBadOnesSkipped(t *testing.T) {
	checkNoCacheLeaks(t)
	conn := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") == "true" {
			w.Header().Set("Content-Type", mediaProtobuf+";stream=watch")
			w.Write(watchFrame("MODIFIED", envelope("Pod", badPodProto("shop", "broken-2"))))
			w.Write(watchFrame("ADDED", podProto(realisticPod(2))))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		w.Header().Set("Content-Type", mediaProtobuf)
		w.Write(podPage("9", "", rawPod(0), badPodProto("shop", "broken-1"), rawPod(1)))
	})
	for _, keep := range []bool{false, true} {
		logs, logger := newCacheLogs()
		c := NewCache(conn, CacheOptions{KeepManagedFields: keep, Logger: logger})
		inf, err := InformerFor[corev1.Pod](c)
		if err != nil {
			t.Fatal(err)
		}
		startCache(t, c)
		if err := inf.WaitForSync(cacheTestCtx(t)); err != nil {
			t.Fatal(err)
		}
		cacheEventually(t, "the pod added by the watch", func() bool { _, ok := inf.Get("shop", realisticPod(2).Name); return ok })
		for i := range 3 {
			want := realisticPod(i)
			want.APIVersion, want.Kind = "v1", "Pod"
			if !keep {
				want.ManagedFields = nil
			}
			if got, _ := inf.Get("shop", want.Name); !reflect.DeepEqual(got, want) {
				t.Errorf("KeepManagedFields=%v: stored pod %d =\n%+v\nwant\n%+v", keep, i, got, want)
			}
		}
		if l := logs.lines("could not decode"); len(l) != 2 || !strings.Contains(l[0], "shop/broken-1") || !strings.Contains(l[1], "shop/broken-2") {
			t.Errorf("KeepManagedFields=%v: want log lines naming shop/broken-1 and shop/broken-2, got:\n%s", keep, logs)
		}
	}
}

func TestClient_FaultInjection_GarbageJSON_IsAnError(t *testing.T) {
	conn := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			w.Write([]byte("<html>proxy error</html>"))
			return
		}
		w.Header().Set("Content-Type", mediaJSON)
		w.Write([]byte(`{"kind":"GizmoList","items":[{"metadata":{"name":"a"}},{"metad`))
	})
	g := NewClient[gizmo](conn)
	if _, err := g.List(t.Context(), ListOptions{}); err == nil {
		t.Error("List of garbage JSON: no error")
	}
	if _, err := g.Get(t.Context(), "ns", "a"); err == nil {
		t.Error("Get of garbage JSON: no error")
	}
	err := g.Update(t.Context(), &gizmo{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}})
	var se *apierrors.StatusError
	if !errors.As(err, &se) || se.ErrStatus.Code != http.StatusBadGateway || !strings.Contains(err.Error(), "proxy error") {
		t.Errorf("Update answered 502 with HTML: err = %v, want a StatusError with code 502 quoting the body", err)
	}
}

func TestClient_FaultInjection_TruncatedWatchFrame_EndsTheWatchWithAnError(t *testing.T) {
	frame := watchFrame("ADDED", podProto(realisticPod(1)))
	conn := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") != "true" || r.URL.Query().Get("allowWatchBookmarks") != "true" || r.URL.Query().Get("timeoutSeconds") != "30" {
			t.Errorf("watch query = %s", r.URL.RawQuery)
		}
		w.Header().Set("Content-Type", mediaProtobuf+";stream=watch")
		w.Write(frame)
		w.Write(frame[:len(frame)-3])
	})
	w, err := NewClient[corev1.Pod](conn).watch(t.Context(), ListOptions{Namespace: "shop"}, "5", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	evs, err := readEvents(w)
	if len(evs) != 1 || evs[0].Object == nil || err == nil || err == io.EOF {
		t.Errorf("got %d events and %v; want 1 event and a truncation error", len(evs), err)
	}
}

func TestClient_FaultInjection_NotFoundWithoutDetails_IsErrNotInstalled(t *testing.T) {
	conn := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/missing") {
			w.Header().Set("Content-Type", mediaJSON)
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"details":{"name":"missing","group":"kctl.example.com","kind":"gizmos"}}`))
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte("404 page not found"))
	})
	g := NewClient[gizmo](conn)
	_, err := g.Get(t.Context(), "ns", "missing")
	if !apierrors.IsNotFound(err) || errors.Is(err, ErrNotInstalled) {
		t.Errorf("a missing object: err = %v, want NotFound and not ErrNotInstalled", err)
	}
	_, err = g.List(t.Context(), ListOptions{})
	want := "kctl: gizmos.kctl.example.com/v1 is not installed on the API server: apply its CRD"
	if !errors.Is(err, ErrNotInstalled) || err.Error() != want {
		t.Errorf("a 404 page: err = %v, want %q matching ErrNotInstalled", err, want)
	}
}

func TestClient_FaultInjection_ExpiredContinueToken_RestartsTheList(t *testing.T) {
	var mu sync.Mutex
	expired := 1
	firstPages := 0 // requests of the first page: one per start
	conn := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", mediaJSON)
		switch r.URL.Query().Get("continue") {
		case "":
			firstPages++
			w.Write([]byte(`{"metadata":{"continue":"t1"},"items":[{"metadata":{"name":"a"}}]}`))
		case "t1":
			if expired > 0 {
				expired--
				w.WriteHeader(http.StatusGone)
				w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Expired","code":410,"message":"continue too old"}`))
				return
			}
			w.Write([]byte(`{"metadata":{},"items":[{"metadata":{"name":"b"}}]}`))
		}
	})
	items, err := NewClient[gizmo](conn).List(t.Context(), ListOptions{})
	if err != nil || len(items) != 2 || items[0].Name != "a" || items[1].Name != "b" {
		t.Errorf("List with an expired continue token = %d items, %v; want a and b once each", len(items), err)
	}
	mu.Lock()
	if firstPages != 2 {
		t.Errorf("List with one expired continue token asked for the first page %d times, want 2", firstPages)
	}
	expired = 100
	firstPages = 0
	mu.Unlock()
	if _, err := NewClient[gizmo](conn).List(t.Context(), ListOptions{}); !apierrors.IsResourceExpired(err) {
		t.Errorf("List whose token always expires: err = %v, want ResourceExpired after %d restarts", err, listMaxRestarts)
	}
	mu.Lock()
	defer mu.Unlock()
	if firstPages != listMaxRestarts+1 {
		t.Errorf("List whose token always expires asked for the first page %d times, want %d: once, then once per restart",
			firstPages, listMaxRestarts+1)
	}
}

func TestClient_UserAgentAndSelectors_AreSent(t *testing.T) {
	conn := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		if ua := r.UserAgent(); !strings.HasPrefix(ua, "kctl/") || !strings.Contains(ua, "/amd64") && !strings.Contains(ua, "/arm64") {
			t.Errorf("User-Agent = %q, want kctl/<version> (os/arch)", ua)
		}
		if q := r.URL.Query(); q.Get("labelSelector") != "app=web" || q.Get("fieldSelector") != "spec.nodeName=n1" || q.Get("limit") != "500" {
			t.Errorf("query = %s", r.URL.RawQuery)
		}
		if r.Header.Get("Accept") != mediaProtobuf+", "+mediaJSON {
			t.Errorf("Accept = %q", r.Header.Get("Accept"))
		}
		w.Header().Set("Content-Type", mediaJSON)
		w.Write([]byte(`{"metadata":{},"items":[]}`))
	})
	_, err := NewClient[corev1.Pod](conn).List(t.Context(), ListOptions{Labels: labels.SelectorFromSet(labels.Set{"app": "web"}), Fields: "spec.nodeName=n1"})
	if err != nil {
		t.Fatal(err)
	}
}

func TestClient_MisuseWithoutAServer_IsAClearError(t *testing.T) {
	conn := fakeServer(t, func(w http.ResponseWriter, r *http.Request) { t.Errorf("unexpected request %s", r.URL) })
	if _, err := NewClient[undeclared](conn).Get(t.Context(), "ns", "x"); err == nil || !strings.Contains(err.Error(), "declare it with kctl.Declare") {
		t.Errorf("a client for an undeclared type: err = %v", err)
	}
	g := NewClient[gizmo](conn)
	if err := g.Patch(t.Context(), &gizmo{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x"}}, StrategicMergePatch, []byte(`{}`), PatchOptions{}); err == nil || !strings.Contains(err.Error(), "strategic merge patch works only for k8s.io/api types") {
		t.Errorf("strategic merge patch of a CRD: err = %v", err)
	}
	if err := g.Apply(t.Context(), &gizmo{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x"}}, PatchOptions{}); err == nil || !strings.Contains(err.Error(), "FieldManager") {
		t.Errorf("apply without a field manager: err = %v", err)
	}
	if _, err := g.Get(t.Context(), "", "x"); err == nil || !strings.Contains(err.Error(), "give a namespace") {
		t.Errorf("get of a namespaced object without namespace: err = %v", err)
	}
	if err := g.DeleteAllOf(t.Context(), ListOptions{}, DeleteOptions{}); err == nil {
		t.Error("DeleteAllOf of a namespaced resource without namespace: no error")
	}
	g.cache = func(context.Context) (*Informer[gizmo], error) { return nil, errors.New("cache is off") }
	if _, err := g.Get(t.Context(), "ns", "x"); err == nil || !strings.Contains(err.Error(), "cache is off") {
		t.Errorf("a cached Get whose cache fails: err = %v", err)
	}
	if _, err := g.Uncached().Get(t.Context(), "", "x"); err == nil || strings.Contains(err.Error(), "cache") {
		t.Errorf("Uncached().Get: err = %v, want the namespace error, not the cache's", err)
	}
}

// Integration tests against the local control plane.

const gizmoCRD = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"gizmos.kctl.example.com"},
"spec":{"group":"kctl.example.com","scope":"Namespaced","names":{"plural":"gizmos","singular":"gizmo","kind":"Gizmo","listKind":"GizmoList"},
"versions":[{"name":"v1","served":true,"storage":true,"subresources":{"status":{}},"schema":{"openAPIV3Schema":{"type":"object","properties":{
"spec":{"type":"object","properties":{"size":{"type":"integer"},"color":{"type":"string"},"tags":{"type":"array","items":{"type":"string"}}}},
"status":{"type":"object","properties":{"ready":{"type":"boolean"}}}}}}}]}}`

// installGizmoCRD applies the Gizmo CRD and waits until the server serves it.
func installGizmoCRD(t *testing.T, cfg *rest.Config) *Client[gizmo] {
	t.Helper()
	code, body := testRawRequest(t, cfg, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", gizmoCRD)
	if code != http.StatusCreated && code != http.StatusConflict {
		t.Fatalf("creating the Gizmo CRD: %d %s", code, body)
	}
	g := NewClient[gizmo](clientTestConn(t, cfg))
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, err := g.List(t.Context(), ListOptions{Namespace: "default"})
		if err == nil {
			return g
		}
		if !errors.Is(err, ErrNotInstalled) || time.Now().After(deadline) {
			t.Fatalf("the Gizmo CRD is not served: %v", err)
		}
	}
}

func TestClient_ConfigMap_CRUD_UpdatesInPlaceAndCallsAfterWrite(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	cms := NewClient[corev1.ConfigMap](clientTestConn(t, cfg))
	var wrote []string
	cms.afterWrite = func(m metav1.Object) { wrote = append(wrote, m.GetResourceVersion()) }
	ctx := t.Context()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings", Labels: map[string]string{"app": "web"}}, Data: map[string]string{"mode": "slow"}}
	if err := cms.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if cm.UID == "" || cm.ResourceVersion == "" || cm.Kind != "ConfigMap" || cm.APIVersion != "v1" {
		t.Errorf("after Create: uid %q rv %q %s %s; want them from the server", cm.UID, cm.ResourceVersion, cm.APIVersion, cm.Kind)
	}
	if err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}}); !apierrors.IsAlreadyExists(err) {
		t.Errorf("second Create: err = %v, want AlreadyExists", err)
	}
	got, err := cms.Get(ctx, ns, "settings")
	if err != nil || got.Data["mode"] != "slow" || got.Kind != "ConfigMap" {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	got.Data["mode"] = "fast"
	if err := cms.Update(ctx, got); err != nil || got.ResourceVersion == cm.ResourceVersion {
		t.Fatalf("Update: %v, rv %s (was %s)", err, got.ResourceVersion, cm.ResourceVersion)
	}
	cm.Data["mode"] = "stale"
	if err := cms.Update(ctx, cm); !apierrors.IsConflict(err) {
		t.Errorf("Update with a stale resourceVersion: err = %v, want Conflict", err)
	}
	list, err := cms.List(ctx, ListOptions{Namespace: ns, Labels: labels.SelectorFromSet(labels.Set{"app": "web"})})
	if err != nil || len(list) != 1 || list[0].Data["mode"] != "fast" {
		t.Errorf("List = %d items, %v; want settings with mode fast", len(list), err)
	}
	if err := cms.Delete(ctx, ns, "settings"); err != nil {
		t.Fatal(err)
	}
	_, err = cms.Get(ctx, ns, "settings")
	if !apierrors.IsNotFound(err) || errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), `"settings" not found`) {
		t.Errorf("Get after Delete: err = %v, want NotFound (not ErrNotInstalled)", err)
	}
	// A ConfigMap's delete answers a Status, not the object: afterWrite sees only the create and the update.
	if len(wrote) != 2 || wrote[0] != cm.ResourceVersion || wrote[1] != got.ResourceVersion {
		t.Errorf("afterWrite saw %v, want the resourceVersions of the create and the update", wrote)
	}
}

func testDeployment(ns, name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{Replicas: new(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}}}},
	}
}

func TestClient_Deployment_StatusEveryPatchKindAndApply(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	deps := NewClient[appsv1.Deployment](clientTestConn(t, cfg))
	ctx := t.Context()
	d := testDeployment(ns, "web")
	if err := deps.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	d.Status.ObservedGeneration = d.Generation
	d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "Test"}}
	if err := deps.UpdateStatus(ctx, d); err != nil || len(d.Status.Conditions) != 1 {
		t.Fatalf("UpdateStatus: %v, conditions %v", err, d.Status.Conditions)
	}
	containers := func(d *appsv1.Deployment) (names []string) {
		for _, c := range d.Spec.Template.Spec.Containers {
			names = append(names, c.Name)
		}
		return names
	}
	side := []byte(`{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","image":"busybox:1.36"}]}}}}`)
	got := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
	err := deps.Patch(ctx, got, StrategicMergePatch, side, PatchOptions{})
	if err != nil || len(containers(got)) != 2 {
		t.Errorf("strategic merge patch adding a container: %v, containers %v; want web and sidecar", err, containers(got))
	}
	err = deps.Patch(ctx, got, MergePatch, side, PatchOptions{})
	if err != nil || len(containers(got)) != 1 || containers(got)[0] != "sidecar" {
		t.Errorf("merge patch of the containers: %v, containers %v; want sidecar alone (lists are replaced)", err, containers(got))
	}
	err = deps.Patch(ctx, got, JSONPatch, []byte(`[{"op":"replace","path":"/spec/replicas","value":3}]`), PatchOptions{})
	if err != nil || *got.Spec.Replicas != 3 {
		t.Errorf("JSON patch of replicas: %v, %v", err, got)
	}
	err = deps.Patch(ctx, got, MergePatch, []byte(`{"status":{"observedGeneration":42}}`), PatchOptions{Subresource: "status"})
	if err != nil || got.Status.ObservedGeneration != 42 {
		t.Errorf("merge patch of the status subresource: %v, %+v", err, got.Status)
	}
	applied := testDeployment(ns, "applied")
	if err := deps.Apply(ctx, applied, PatchOptions{FieldManager: "kctl-test"}); err != nil || applied.UID == "" {
		t.Fatalf("Apply of a typed Deployment: %v", err)
	}
	other := testDeployment(ns, "applied")
	other.Spec.Replicas = new(int32(5))
	if err := deps.Apply(ctx, other, PatchOptions{FieldManager: "someone-else"}); !apierrors.IsConflict(err) {
		t.Errorf("Apply of a field another manager owns: err = %v, want Conflict", err)
	}
	if err := deps.Apply(ctx, other, PatchOptions{FieldManager: "someone-else", Force: true}); err != nil || *other.Spec.Replicas != 5 {
		t.Errorf("forced Apply: %v, replicas %v", err, other.Spec.Replicas)
	}
}

func TestClient_CRD_CRUDStatusPatchesApplyAndWatch(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	g := installGizmoCRD(t, cfg)
	ctx := t.Context()
	w, err := g.watch(ctx, ListOptions{Namespace: ns}, "", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	obj := &gizmo{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g1"}, Spec: gizmoSpec{Size: 1, Color: "red"}}
	if err := g.Create(ctx, obj); err != nil || obj.UID == "" || obj.Kind != "Gizmo" {
		t.Fatalf("Create: %v, %+v", err, obj)
	}
	obj.Spec.Size, obj.Status.Ready = 2, true
	if err := g.Update(ctx, obj); err != nil || obj.Spec.Size != 2 || obj.Status.Ready {
		t.Errorf("Update: %v, %+v; want size 2 and the status change ignored", err, obj)
	}
	obj.Status.Ready = true
	if err := g.UpdateStatus(ctx, obj); err != nil || !obj.Status.Ready {
		t.Errorf("UpdateStatus: %v, %+v", err, obj.Status)
	}
	got := &gizmo{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g1"}}
	err = g.Patch(ctx, got, MergePatch, []byte(`{"spec":{"color":"blue"}}`), PatchOptions{})
	if err != nil || got.Spec.Color != "blue" || got.Spec.Size != 2 {
		t.Errorf("merge patch: %v, %+v", err, got)
	}
	err = g.Patch(ctx, got, JSONPatch, []byte(`[{"op":"add","path":"/spec/tags","value":["a"]}]`), PatchOptions{})
	if err != nil || len(got.Spec.Tags) != 1 {
		t.Errorf("JSON patch: %v, %+v", err, got)
	}
	if err := g.Patch(ctx, got, StrategicMergePatch, []byte(`{}`), PatchOptions{}); err == nil {
		t.Error("strategic merge patch of a CRD: no error")
	}
	a := &gizmo{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g2"}, Spec: gizmoSpec{Size: 7}}
	if err := g.Apply(ctx, a, PatchOptions{FieldManager: "kctl-test"}); err != nil || a.UID == "" || a.Spec.Size != 7 {
		t.Errorf("Apply: %v, %+v", err, a)
	}
	if err := g.Delete(ctx, ns, "g1"); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for !seen["DELETED g1"] {
		ev, err := w.Next()
		if err != nil {
			t.Fatalf("watch ended before the delete of g1: %v (saw %v)", err, seen)
		}
		if ev.Err != nil || ev.Object == nil {
			t.Fatalf("watch event %s: %v", ev.Type, ev.Err)
		}
		seen[ev.Type+" "+ev.Object.Name] = true
	}
	if !seen["ADDED g1"] || !seen["MODIFIED g1"] || !seen["ADDED g2"] {
		t.Errorf("watch saw %v, want ADDED, MODIFIED and DELETED of g1 and ADDED of g2", seen)
	}
}

func TestClient_ProtobufWatch_AgainstTheServer_SeesEveryEventType(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	cms := NewClient[corev1.ConfigMap](clientTestConn(t, cfg))
	ctx := t.Context()
	first := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "first"}}
	if err := cms.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	w, err := cms.watch(ctx, ListOptions{Namespace: ns}, first.ResourceVersion, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if !w.proto {
		t.Error("the watch of a built-in type is not protobuf")
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "watched"}, Data: map[string]string{"a": "1"}}
	if err := cms.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	cm.Data["a"] = "2"
	if err := cms.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, ns, "watched"); err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < 3 {
		ev, err := w.Next()
		if err != nil {
			t.Fatalf("watch: %v after %v", err, got)
		}
		if ev.Err != nil {
			t.Fatalf("watch event: %v", ev.Err)
		}
		if ev.Type != "BOOKMARK" {
			got = append(got, ev.Type+" "+ev.Object.Name+" "+ev.Object.Data["a"])
		}
	}
	if want := "ADDED watched 1,MODIFIED watched 2,DELETED watched 2"; strings.Join(got, ",") != want {
		t.Errorf("watch events = %v, want %s", got, want)
	}
}

func TestClient_List_Paginates1200ConfigMapsInPagesOf500(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	cfg.QPS, cfg.Burst = 2000, 2000
	var mu sync.Mutex
	var lists []string
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodGet {
				mu.Lock()
				lists = append(lists, r.URL.Query().Get("limit")+" "+fmt.Sprint(r.URL.Query().Has("continue")))
				mu.Unlock()
			}
			return rt.RoundTrip(r)
		})
	})
	cms := NewClient[corev1.ConfigMap](clientTestConn(t, cfg))
	ctx := t.Context()
	var wg sync.WaitGroup
	errs := make(chan error, 1200)
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < 1200; i += 16 {
				errs <- cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("cm-%04d", i)}})
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	items, err := cms.List(ctx, ListOptions{Namespace: ns})
	if err != nil || len(items) != 1200 {
		t.Fatalf("List = %d items, %v; want 1200", len(items), err)
	}
	names := map[string]bool{}
	for _, cm := range items {
		names[cm.Name] = true
	}
	if len(names) != 1200 {
		t.Errorf("List returned %d distinct names, want 1200", len(names))
	}
	if want := "500 false,500 true,500 true"; strings.Join(lists, ",") != want {
		t.Errorf("list requests (limit, continue) = %v, want %s", lists, want)
	}
	if err := cms.DeleteAllOf(ctx, ListOptions{Namespace: ns}, DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if items, err := cms.List(ctx, ListOptions{Namespace: ns}); err != nil || len(items) != 0 {
		t.Errorf("List after DeleteAllOf = %d items, %v", len(items), err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestClient_DeleteWithOptions_PreconditionsAndPropagation(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	cms := NewClient[corev1.ConfigMap](clientTestConn(t, cfg))
	ctx := t.Context()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"}}
	if err := cms.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if err := cms.DeleteWithOptions(ctx, ns, "c", DeleteOptions{UID: "not-the-uid"}); !apierrors.IsConflict(err) {
		t.Errorf("delete with a wrong UID precondition: err = %v, want Conflict", err)
	}
	if err := cms.DeleteWithOptions(ctx, ns, "c", DeleteOptions{ResourceVersion: "1"}); !apierrors.IsConflict(err) {
		t.Errorf("delete with a stale resourceVersion precondition: err = %v, want Conflict", err)
	}
	opts := DeleteOptions{UID: cm.UID, ResourceVersion: cm.ResourceVersion, Propagation: metav1.DeletePropagationForeground, GracePeriodSeconds: new(int64(0))}
	if err := cms.DeleteWithOptions(ctx, ns, "c", opts); err != nil {
		t.Errorf("delete with matching preconditions: %v", err)
	}
}

func TestClient_Unprivileged_IsForbiddenWithAClearError(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	cms := NewClient[corev1.ConfigMap](clientTestConn(t, testUnprivilegedConfig(t)))
	_, err := cms.List(t.Context(), ListOptions{Namespace: ns})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "kctl: list configmaps/v1 in namespace "+ns) ||
		!strings.Contains(err.Error(), "grant this identity RBAC permission to list configmaps") {
		t.Errorf("List as the unprivileged user: err = %v", err)
	}
	err = cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "x"}})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "cannot create resource") {
		t.Errorf("Create as the unprivileged user: err = %v", err)
	}
}

type notInstalledGizmo struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
}

var _ = Declare[notInstalledGizmo](Resource{Group: "absent.kctl.example.com", Version: "v1", Kind: "Gizmo", Namespaced: true})

func TestClient_CRDNotInstalled_IsErrNotInstalledNamingIt(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	c := NewClient[notInstalledGizmo](clientTestConn(t, cfg))
	want := "kctl: gizmos.absent.kctl.example.com/v1 is not installed on the API server: apply its CRD " +
		"(the server serves no group version absent.kctl.example.com/v1: check Group and Version in kctl.Declare[kctl.notInstalledGizmo])"
	_, err := c.List(t.Context(), ListOptions{})
	if !errors.Is(err, ErrNotInstalled) || err.Error() != want {
		t.Errorf("List: err = %v, want %q", err, want)
	}
	_, err = c.Get(t.Context(), "default", "x")
	if !errors.Is(err, ErrNotInstalled) {
		t.Errorf("Get: err = %v, want ErrNotInstalled", err)
	}
	if _, err := c.watch(t.Context(), ListOptions{}, "", time.Minute); !errors.Is(err, ErrNotInstalled) {
		t.Errorf("watch: err = %v, want ErrNotInstalled", err)
	}
}

func TestCreateOrUpdate_And_CreateOrPatch_ReportWhatTheyDid(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	ctx := t.Context()
	cms := NewClient[corev1.ConfigMap](clientTestConn(t, cfg))
	setMode := func(mode string) func(*corev1.ConfigMap) error {
		return func(cm *corev1.ConfigMap) error { cm.Data = map[string]string{"mode": mode}; return nil }
	}
	for i, want := range []struct {
		mode string
		res  OperationResult
	}{{"a", OperationResultCreated}, {"a", OperationResultNone}, {"b", OperationResultUpdated}} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cou"}}
		res, err := CreateOrUpdate(ctx, cms, cm, setMode(want.mode))
		if err != nil || res != want.res || cm.Data["mode"] != want.mode || cm.UID == "" {
			t.Errorf("step %d: CreateOrUpdate(mode %s) = %s, %v, %v; want %s", i, want.mode, res, err, cm.Data, want.res)
		}
	}
	g := installGizmoCRD(t, cfg)
	steps := []struct {
		mutate func(*gizmo)
		res    OperationResult
	}{
		{func(x *gizmo) { x.Spec.Size = 1 }, OperationResultCreated},
		{func(x *gizmo) { x.Spec.Size = 1 }, OperationResultNone},
		{func(x *gizmo) { x.Spec.Color = "red" }, OperationResultUpdated},
		{func(x *gizmo) { x.Status.Ready = true }, OperationResultUpdatedStatusOnly},
		{func(x *gizmo) { x.Spec.Size, x.Status.Ready = 3, false }, OperationResultUpdatedStatus},
	}
	for i, s := range steps {
		obj := &gizmo{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cop"}}
		res, err := CreateOrPatch(ctx, g, obj, func(x *gizmo) error { s.mutate(x); return nil })
		if err != nil || res != s.res {
			t.Errorf("step %d: CreateOrPatch = %s, %v; want %s", i, res, err, s.res)
		}
	}
	got, err := g.Get(ctx, ns, "cop")
	if err != nil || got.Spec.Size != 3 || got.Spec.Color != "red" || got.Status.Ready {
		t.Errorf("after CreateOrPatch: %+v, %v; want size 3, red, not ready", got, err)
	}
	_, err = CreateOrUpdate(ctx, cms, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cou"}}, func(cm *corev1.ConfigMap) error {
		cm.Name = "renamed"
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "must keep the name") {
		t.Errorf("a mutate that renames: err = %v", err)
	}
	var tries int
	err = RetryOnConflict(ctx, func() error {
		tries++
		cm, err := cms.Get(ctx, ns, "cou")
		if err != nil {
			return err
		}
		if tries == 1 {
			cm.ResourceVersion = "1" // stale: Conflict
		}
		cm.Data["mode"] = "retried"
		return cms.Update(ctx, cm)
	})
	if err != nil || tries != 2 {
		t.Errorf("RetryOnConflict = %v after %d tries; want success after 2", err, tries)
	}
}
