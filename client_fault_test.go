package kctl

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

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
	list := pbField(1, meta)
	for _, item := range items {
		list = append(list, pbField(2, item)...)
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
