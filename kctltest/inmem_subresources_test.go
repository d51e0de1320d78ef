package kctltest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/internal/protowire"
	"github.com/kctl-dev/kctl/kctltest"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// protoCall sends body (protobuf if ct says so) and asks for protobuf
// first, as kctl and client-go's typed clients do; it returns the status
// code and the body.
func protoCall(t *testing.T, env *kctltest.Env, method, path, ct string, body []byte) (int, []byte) {
	t.Helper()
	hc, err := rest.HTTPClientFor(env.Config())
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, strings.TrimSuffix(env.Config().Host, "/")+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/vnd.kubernetes.protobuf, application/json")
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// scaleIn decodes a protobuf Scale answer (its status code, then body).
func scaleIn(t *testing.T, code int, b []byte) autoscalingv1.Scale {
	t.Helper()
	var sc autoscalingv1.Scale
	kind, raw, err := protowire.Unwrap(b)
	if err == nil {
		err = sc.Unmarshal(raw)
	}
	if code != http.StatusOK || err != nil {
		t.Fatalf("a Scale answer: HTTP %d %v: %q", code, err, b)
	}
	if string(kind) != "Scale" {
		t.Errorf("a Scale answer is a %q, want a Scale", kind)
	}
	return sc
}

// The scale subresource of a StatefulSet (and of Deployments and
// ReplicaSets) reads and sets spec.replicas as an autoscaling/v1 Scale,
// in protobuf as the HorizontalPodAutoscaler's client talks: a change
// bumps the generation, a stale resourceVersion is a Conflict, a
// negative count Invalid, and a missing object NotFound. (The wire
// scenario compares the rest, in JSON, with a real API server.)
func TestInMemory_Scale_SetsReplicasAsAnAutoscalingScale(t *testing.T) {
	env := kctltest.StartInMemory(t)
	ns := env.Namespace(t)
	labels := map[string]string{"app": "s"}
	one := int32(1)
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s"}, Spec: appsv1.StatefulSetSpec{Replicas: &one,
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "c"}}}}}}
	if err := kctl.NewClient[appsv1.StatefulSet](env.Conn).Create(t.Context(), sts); err != nil {
		t.Fatal(err)
	}
	path := "/apis/apps/v1/namespaces/" + ns + "/statefulsets/s/scale"
	call := func(method, ct string, body []byte) (int, []byte) { return protoCall(t, env, method, path, ct, body) }
	code, b := call("GET", "", nil)
	sc := scaleIn(t, code, b)
	if sc.Spec.Replicas != 1 || sc.Status.Selector != "app=s" || sc.Name != "s" || sc.Namespace != ns || sc.ResourceVersion != sts.ResourceVersion {
		t.Fatalf("GET s/scale = %+v, want 1 replica, selector app=s, s's resourceVersion %s", sc, sts.ResourceVersion)
	}
	put := func(sc autoscalingv1.Scale) (int, []byte) {
		pb, err := sc.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return call("PUT", "application/vnd.kubernetes.protobuf", protowire.Envelope("autoscaling/v1", "Scale", pb))
	}
	stale := sc
	sc.Spec.Replicas = 4
	code, b = put(sc)
	got := scaleIn(t, code, b)
	if got.Spec.Replicas != 4 || got.ResourceVersion == sc.ResourceVersion {
		t.Errorf("PUT s/scale with 4 replicas = %+v, want 4 at a new resourceVersion", got)
	}
	stale.Spec.Replicas = 5
	if code, b := put(stale); code != http.StatusConflict {
		t.Errorf("PUT s/scale from a stale resourceVersion: HTTP %d %q, want 409", code, b)
	}
	got.Spec.Replicas = -1
	if code, b := put(got); code != http.StatusUnprocessableEntity {
		t.Errorf("PUT s/scale with -1 replicas: HTTP %d %q, want 422", code, b)
	}
	code, b = call("PATCH", "application/strategic-merge-patch+json", []byte(`{"spec":{"replicas":6}}`))
	got = scaleIn(t, code, b)
	if got.Spec.Replicas != 6 {
		t.Errorf("strategic merge patch of s/scale to 6 = %+v", got)
	}
	s, err := kctl.NewClient[appsv1.StatefulSet](env.Conn).Get(t.Context(), ns, "s")
	if err != nil || *s.Spec.Replicas != 6 || s.Generation != 3 {
		t.Errorf("s after two scales: %v replicas, generation %d, %v; want 6 replicas, generation 3", *s.Spec.Replicas, s.Generation, err)
	}
	for _, res := range []string{"deployments", "replicasets"} {
		if code, b := protoCall(t, env, "GET", "/apis/apps/v1/namespaces/"+ns+"/"+res+"/nothing/scale", "", nil); code != http.StatusNotFound {
			t.Errorf("GET %s/nothing/scale: HTTP %d %q, want 404", res, code, b)
		}
	}
}

// An eviction deletes the Pod (no PodDisruptionBudget is consulted); a
// Pod with a finalizer is then being deleted; a missing one is NotFound.
func TestInMemory_Eviction_DeletesThePod(t *testing.T) {
	env := kctltest.StartInMemory(t)
	ns := env.Namespace(t)
	pods := kctl.NewClient[corev1.Pod](env.Conn)
	evict := func(name string) (int, []byte) {
		return protoCall(t, env, "POST", "/api/v1/namespaces/"+ns+"/pods/"+name+"/eviction", "application/json",
			[]byte(fmt.Sprintf(`{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":%q,"namespace":%q}}`, name, ns)))
	}
	for _, p := range []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plain"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "held", Finalizers: []string{"kctl.dev/test"}}},
	} {
		if err := pods.Create(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		code, b := evict(p.Name)
		var st metav1.Status
		json.Unmarshal(b, &st)
		if code != http.StatusCreated || st.Status != metav1.StatusSuccess {
			t.Errorf("evict %s: HTTP %d %q, want 201 and a Status of Success", p.Name, code, b)
		}
	}
	if _, err := pods.Get(t.Context(), ns, "plain"); err == nil {
		t.Errorf("plain is still there after its eviction")
	}
	if held, err := pods.Get(t.Context(), ns, "held"); err != nil || held.DeletionTimestamp == nil {
		t.Errorf("held (a finalizer) after its eviction: %v; want it being deleted", err)
	}
	if code, b := evict("nothing"); code != http.StatusNotFound {
		t.Errorf("evict a missing Pod: HTTP %d %q, want 404", code, b)
	}
}
