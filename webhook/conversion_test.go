package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kctl-dev/kctl"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// sprocket is a CRD served at v1 (stored) and v2: v1's spec.size is v2's
// spec.replicas, and v2 adds spec.unit.
type sprocket struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		Size int `json:"size"`
	} `json:"spec"`
}

type sprocketV2 struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		Replicas int    `json:"replicas"`
		Unit     string `json:"unit,omitempty"`
	} `json:"spec"`
}

var (
	_ = kctl.Declare[sprocket](kctl.Resource{Group: "conversion.kctl.dev", Version: "v1", Kind: "Sprocket", Namespaced: true})
	_ = kctl.Declare[sprocketV2](kctl.Resource{Group: "conversion.kctl.dev", Version: "v2", Kind: "Sprocket", Namespaced: true})
)

func sprocketCRD(url string, caBundle []byte) string {
	ca, _ := json.Marshal(caBundle) // base64, as the API wants
	version := func(name string, storage bool) string {
		return fmt.Sprintf(`{"name":%q,"served":true,"storage":%v,
			"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}`, name, storage)
	}
	return `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"sprockets.conversion.kctl.dev"},
 "spec":{"group":"conversion.kctl.dev","scope":"Namespaced",
  "names":{"plural":"sprockets","singular":"sprocket","kind":"Sprocket","listKind":"SprocketList"},
  "versions":[` + version("v1", true) + `,` + version("v2", false) + `],
  "conversion":{"strategy":"Webhook","webhook":{"conversionReviewVersions":["v1"],
   "clientConfig":{"url":"` + url + `","caBundle":` + string(ca) + `}}}}}`
}

// TestWebhooks_RealAPIServer_ConversionBetweenTwoVersions: a CRD stored
// at v1 is read, listed and written at v2 through kctl's Convert, with
// kctl's own typed clients for both versions.
func TestWebhooks_RealAPIServer_ConversionBetweenTwoVersions(t *testing.T) {
	f := newWebhookFixture(t)
	var toV2, toV1 atomic.Int64
	Convert(f.hooks,
		func(src *sprocket, dst *sprocketV2) error {
			toV2.Add(1)
			if src.Spec.Size < 0 {
				return errors.New("a negative size has no v2 form")
			}
			dst.Spec.Replicas = src.Spec.Size
			dst.Spec.Unit = "pods"
			return nil
		},
		func(src *sprocketV2, dst *sprocket) error {
			toV1.Add(1)
			dst.Spec.Size = src.Spec.Replicas
			return nil
		})
	f.start(t)
	defer testCRDAbsent(t, f.cfg, f.ns, "conversion.kctl.dev", "v2", "sprockets")()
	if code, body := testRawRequest(t, f.cfg, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", sprocketCRD("https://"+f.addr+"/convert", f.ca.PEM())); code != 201 {
		t.Fatalf("creating the CRD: %d %s", code, body)
	}
	v1 := kctl.ClientFor[sprocket](f.mgr).Uncached()
	v2 := kctl.ClientFor[sprocketV2](f.mgr).Uncached()
	ctx := t.Context()
	eventually(t, "both versions served", func() bool {
		_, err1 := v1.List(ctx, kctl.ListOptions{Namespace: f.ns})
		_, err2 := v2.List(ctx, kctl.ListOptions{Namespace: f.ns})
		return err1 == nil && err2 == nil
	})
	for i := 1; i <= 3; i++ {
		g := &sprocket{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: fmt.Sprintf("g%d", i)}}
		g.Spec.Size = i
		if err := v1.Create(ctx, g); err != nil {
			t.Fatalf("creating %s at v1: %v", g.Name, err)
		}
	}

	got, err := v2.Get(ctx, f.ns, "g2")
	if err != nil {
		t.Fatalf("get at v2: %v", err)
	}
	if got.APIVersion != "conversion.kctl.dev/v2" || got.Spec.Replicas != 2 || got.Spec.Unit != "pods" || got.Name != "g2" || got.UID == "" {
		t.Errorf("g2 at v2 = %s %+v %s uid %q, want v2 with replicas 2, unit pods", got.APIVersion, got.Spec, got.Name, got.UID)
	}

	list, err := v2.List(ctx, kctl.ListOptions{Namespace: f.ns})
	if err != nil {
		t.Fatalf("list at v2: %v", err)
	}
	if len(list) != 3 {
		t.Fatalf("list at v2 has %d items, want 3", len(list))
	}
	for _, g := range list {
		if want := int(g.Name[1] - '0'); g.Spec.Replicas != want || g.Spec.Unit != "pods" {
			t.Errorf("%s listed at v2: %+v, want replicas %d", g.Name, g.Spec, want)
		}
	}
	if toV2.Load() < 3 {
		t.Errorf("%d conversions to v2 for 3 objects read at v2", toV2.Load())
	}

	got.Spec.Replicas = 7
	if err := v2.Update(ctx, got); err != nil {
		t.Fatalf("update at v2: %v", err)
	}
	stored, err := v1.Get(ctx, f.ns, "g2")
	if err != nil {
		t.Fatalf("get at v1: %v", err)
	}
	if stored.Spec.Size != 7 {
		t.Errorf("g2 at v1 after the v2 update: size %d, want 7", stored.Spec.Size)
	}
	fresh := &sprocketV2{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "made-at-v2"}}
	fresh.Spec.Replicas = 4
	if err := v2.Create(ctx, fresh); err != nil {
		t.Fatalf("create at v2: %v", err)
	}
	if stored, err := v1.Get(ctx, f.ns, "made-at-v2"); err != nil || stored.Spec.Size != 4 {
		t.Errorf("made-at-v2 at v1 = %+v, %v; want size 4", stored, err)
	}
	if toV1.Load() == 0 {
		t.Error("no conversion to v1 was called for the writes at v2")
	}

	// A conversion that fails fails the request with its message.
	bad := &sprocket{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "negative"}}
	bad.Spec.Size = -1
	if err := v1.Create(ctx, bad); err != nil {
		t.Fatal(err)
	}
	_, err = v2.Get(ctx, f.ns, "negative")
	if err == nil || !strings.Contains(err.Error(), "a negative size has no v2 form") {
		t.Errorf("get at v2 of an object that does not convert: %v, want the conversion's error", err)
	}
}

// TestConvert_ListInOneReview: a ConversionReview of many objects (the
// API server sends one for a list it converts at once; this one read
// its lists from its per-version watch cache, converting objects one by
// one) is answered with every object converted, in order; one already at
// the desired version is returned as it is.
func TestConvert_ListInOneReview(t *testing.T) {
	f := newWebhookFixture(t)
	Convert(f.hooks,
		func(src *sprocket, dst *sprocketV2) error { dst.Spec.Replicas = src.Spec.Size; return nil },
		func(src *sprocketV2, dst *sprocket) error { dst.Spec.Size = src.Spec.Replicas; return nil })
	f.start(t)
	review := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u-1",
	 "desiredAPIVersion":"conversion.kctl.dev/v2","objects":[
	  {"apiVersion":"conversion.kctl.dev/v1","kind":"Sprocket","metadata":{"name":"a","namespace":"n","labels":{"l":"1"}},"spec":{"size":1}},
	  {"apiVersion":"conversion.kctl.dev/v2","kind":"Sprocket","metadata":{"name":"b","namespace":"n"},"spec":{"replicas":2,"unit":"kept"}},
	  {"apiVersion":"conversion.kctl.dev/v1","kind":"Sprocket","metadata":{"name":"c","namespace":"n"},"spec":{"size":3}}]}}`
	resp, err := webhookClient(f.ca).Post("https://"+f.addr+"/convert", "application/json", strings.NewReader(review))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		APIVersion, Kind string
		Response         struct {
			UID              string
			ConvertedObjects []sprocketV2
			Result           metav1.Status
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	r := out.Response
	if resp.StatusCode != 200 || out.Kind != "ConversionReview" || r.UID != "u-1" || r.Result.Status != "Success" || len(r.ConvertedObjects) != 3 {
		t.Fatalf("answer %d %s uid %q result %+v with %d objects, want 200, uid u-1, Success, 3", resp.StatusCode, out.Kind, r.UID, r.Result, len(r.ConvertedObjects))
	}
	for i, want := range []struct {
		name, unit string
		replicas   int
	}{{"a", "", 1}, {"b", "kept", 2}, {"c", "", 3}} {
		g := r.ConvertedObjects[i]
		if g.APIVersion != "conversion.kctl.dev/v2" || g.Kind != "Sprocket" || g.Name != want.name || g.Namespace != "n" || g.Spec.Replicas != want.replicas || g.Spec.Unit != want.unit {
			t.Errorf("object %d = %s %s %s/%s %+v, want v2 Sprocket n/%s replicas %d", i, g.APIVersion, g.Kind, g.Namespace, g.Name, g.Spec, want.name, want.replicas)
		}
	}
	if r.ConvertedObjects[0].Labels["l"] != "1" {
		t.Errorf("object a lost its labels: %v", r.ConvertedObjects[0].Labels)
	}
}

func TestConvert_Misuse_IsReportedByStart(t *testing.T) {
	f := newWebhookFixture(t)
	Convert(f.hooks, func(*sprocket, *gadget) error { return nil }, func(*gadget, *sprocket) error { return nil })
	Convert(f.hooks, func(*sprocket, *sprocket) error { return nil }, func(*sprocket, *sprocket) error { return nil })
	Convert(f.hooks, func(*sprocket, *sprocketV2) error { return nil }, func(*sprocketV2, *sprocket) error { return nil })
	Convert(f.hooks, func(*sprocketV2, *sprocket) error { return nil }, func(*sprocket, *sprocketV2) error { return nil })
	err := f.mgr.Start(context.Background())
	for _, want := range []string{"are not one kind in one group", "declare each with its own version", "registered twice"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Start = %v, want an error saying %q", err, want)
		}
	}
}
