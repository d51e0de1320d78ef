package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kctl-dev/kctl"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
)

// Fuzz targets: whatever body a client POSTs, a webhook answers 200 with
// a review of the same UID, or a 4xx, and never panics.

func FuzzAdmissionReview(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","operation":"CREATE",` +
		`"object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"v"}}}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"2","operation":"UPDATE",` +
		`"object":{"metadata":{"name":"a","labels":{"x":"y"}}},"oldObject":{"metadata":{"name":"a"}}}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"3","operation":"DELETE","oldObject":{"data":7}}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"4","operation":"CREATE","object":null}}`))
	validate := admissionHandler(func(ctx context.Context, req *admissionRequest) *admissionResponse {
		typed, err := typedRequest[corev1.ConfigMap](req)
		if err != nil {
			return deny(http.StatusBadRequest, err)
		}
		if typed.Object != nil && typed.Object.Data["k"] == "deny" {
			return denied(errors.New("denied"))
		}
		return &admissionResponse{Allowed: true}
	})
	mutate := admissionHandler(func(ctx context.Context, req *admissionRequest) *admissionResponse {
		patch, denial := defaultPatch(ctx, func(_ context.Context, cm *corev1.ConfigMap) error {
			cm.Labels = map[string]string{"defaulted": "true"}
			return nil
		}, req.Object)
		if denial != nil {
			return denial
		}
		return &admissionResponse{Allowed: true, Patch: patch}
	})
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, h := range []http.Handler{validate, mutate} {
			checkReviewAnswer(t, h, "/", body, func(out []byte) string {
				var review admissionv1.AdmissionReview
				if err := json.Unmarshal(out, &review); err != nil || review.Response == nil {
					t.Fatalf("200 with an answer that is not a review: %s", out)
				}
				return string(review.Response.UID)
			}, func(in []byte) string {
				var review admissionv1.AdmissionReview
				json.Unmarshal(in, &review)
				return string(review.Request.UID)
			})
		}
	})
}

func FuzzConversionReview(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"1","desiredAPIVersion":"conversion.kctl.dev/v2",` +
		`"objects":[{"apiVersion":"conversion.kctl.dev/v1","kind":"Sprocket","metadata":{"name":"a"},"spec":{"size":1}}]}}`))
	f.Add([]byte(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"2","desiredAPIVersion":"conversion.kctl.dev/v1",` +
		`"objects":[{"apiVersion":"conversion.kctl.dev/v2","kind":"Sprocket","spec":{"replicas":"x"}},{"kind":7}]}}`))
	ws := &Server{paths: map[string]bool{}, conversions: map[string]conversion{}}
	ra, _ := kctl.ResourceOf[sprocket]()
	rb, _ := kctl.ResourceOf[sprocketV2]()
	ws.conversions["conversion.kctl.dev/Sprocket"] = conversion{a: ra.APIVersion(), b: rb.APIVersion(),
		convert: func(obj []byte, from, to string) ([]byte, error) {
			if from == ra.APIVersion() {
				return convertOne(obj, ra, rb, func(s *sprocket, d *sprocketV2) error { d.Spec.Replicas = s.Spec.Size; return nil })
			}
			return convertOne(obj, rb, ra, func(s *sprocketV2, d *sprocket) error { d.Spec.Size = s.Spec.Replicas; return nil })
		}}
	f.Fuzz(func(t *testing.T, body []byte) {
		var in conversionReview
		json.Unmarshal(body, &in) // what the server decoded, if it answers 200
		checkReviewAnswer(t, http.HandlerFunc(ws.serveConversion), "/convert", body, func(out []byte) string {
			var review conversionReview
			if err := json.Unmarshal(out, &review); err != nil || review.Response == nil {
				t.Fatalf("200 with an answer that is not a review: %s", out)
			}
			r := review.Response
			if r.Result.Status == "Success" && in.Request != nil && len(r.ConvertedObjects) != len(in.Request.Objects) {
				t.Fatalf("Success with %d objects for %d", len(r.ConvertedObjects), len(in.Request.Objects))
			}
			return string(r.UID)
		}, func([]byte) string {
			return string(in.Request.UID)
		})
	})
}

// checkReviewAnswer POSTs body to h: the answer must be a 4xx, or a 200
// whose review (read by answerUID) has the request's UID (read from body
// by requestUID, called only then).
func checkReviewAnswer(t *testing.T, h http.Handler, path string, body []byte, answerUID, requestUID func([]byte) string) {
	t.Helper()
	req := httptest.NewRequest("POST", path, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	switch {
	case rec.Code == 200:
		if got, want := answerUID(rec.Body.Bytes()), requestUID(body); got != want {
			t.Fatalf("answer's uid %q, request's %q", got, want)
		}
	case rec.Code < 400 || rec.Code >= 500:
		t.Fatalf("status %d for %q: %s", rec.Code, body, rec.Body)
	}
}
