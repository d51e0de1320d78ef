package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// TestWebhooks_RealAPIServer_ValidateAndDefault: the API server calls
// kctl's Validate and Default for a CRD and honours what they answer.
func TestWebhooks_RealAPIServer_ValidateAndDefault(t *testing.T) {
	f := newWebhookFixture(t)
	installGadgetCRD(t, f.cfg, f.ns)
	var mu sync.Mutex
	var defaulted []gadget // what Default got, in order
	Validate(f.hooks, func(ctx context.Context, req AdmissionRequest[gadget]) ([]string, error) {
		if req.Operation == string(admissionv1.Update) && req.OldObject.Spec.Color == "locked" {
			return nil, fmt.Errorf("%s was locked (color %q), not %q", req.Name, req.OldObject.Spec.Color, req.Object.Spec.Color)
		}
		if req.Operation == string(admissionv1.Delete) {
			if req.Object != nil || req.OldObject == nil {
				return nil, errors.New("a DELETE review must have only the old object")
			}
			return nil, fmt.Errorf("%s (color %q) may not be deleted", req.Name, req.OldObject.Spec.Color)
		}
		switch req.Object.Spec.Color {
		case "forbidden":
			return []string{"read the docs"}, errors.New(`color "forbidden" is not allowed`)
		case "bad":
			return nil, apierrors.NewBadRequest("bad color, use a good one")
		case "pale":
			return []string{fmt.Sprintf("color %q is hard to see (asked by %s)", "pale", req.UserInfo.Username)}, nil
		case "dry":
			if req.DryRun {
				return nil, errors.New("dry run seen")
			}
		case "panic":
			panic("the validator panicked on purpose")
		}
		return []string{"validated"}, nil
	})
	Default(f.hooks, func(ctx context.Context, g *gadget) error {
		mu.Lock()
		defaulted = append(defaulted, jsonCopy(t, g))
		mu.Unlock()
		if g.Spec.Color == "refuse" {
			return errors.New("no default for refuse")
		}
		if g.Spec.Size == 0 {
			g.Spec.Size = 1
		}
		if g.Labels == nil {
			g.Labels = map[string]string{}
		}
		g.Labels["defaulted"] = "true"
		return nil
	})
	f.start(t)
	hook := func(name, path string) webhookConfig {
		return webhookConfig{name: name, url: "https://" + f.addr + path, caBundle: f.ca.PEM(), ns: f.ns,
			resource: "gadgets.webhook.kctl.dev", failurePolicy: "Fail", timeout: 10}
	}
	defer applyWebhooks(t, f.cfg, "Validating", "validate.gadgets.kctl.dev", hook("validate.gadgets.kctl.dev", "/validate-webhook-kctl-dev-v1-gadget"))()
	defer applyWebhooks(t, f.cfg, "Mutating", "mutate.gadgets.kctl.dev", hook("mutate.gadgets.kctl.dev", "/mutate-webhook-kctl-dev-v1-gadget"))()
	gadgets := "/apis/webhook.kctl.dev/v1/namespaces/" + f.ns + "/gadgets"
	i := 0
	eventually(t, "both webhooks active", func() bool {
		i++
		r := testRequest(t, f.cfg, "POST", gadgets, gadgetJSON(fmt.Sprintf("probe-%d", i), `{"color":"forbidden"}`))
		mu.Lock()
		mutated := len(defaulted) > 0
		mu.Unlock()
		return r.code == 403 && mutated
	})

	t.Run("denial reaches the client unchanged", func(t *testing.T) {
		r := testRequest(t, f.cfg, "POST", gadgets, gadgetJSON("denied", `{"color":"forbidden"}`))
		s := r.status(t)
		want := `admission webhook "validate.gadgets.kctl.dev" denied the request: color "forbidden" is not allowed`
		if r.code != 403 || s.Message != want || s.Reason != "Forbidden" {
			t.Errorf("POST = %d %s %q, want 403 Forbidden %q", r.code, s.Reason, s.Message, want)
		}
		if !strings.Contains(strings.Join(r.warnings, "\n"), "read the docs") {
			t.Errorf("a denial's warnings = %q, want them to reach the client", r.warnings)
		}
		r = testRequest(t, f.cfg, "POST", gadgets, gadgetJSON("bad", `{"color":"bad"}`))
		if s := r.status(t); r.code != 400 || !strings.HasSuffix(s.Message, "denied the request: bad color, use a good one") {
			t.Errorf("POST with an APIStatus error = %d %q, want its code 400 and message", r.code, s.Message)
		}
		r = testRequest(t, f.cfg, "POST", gadgets, gadgetJSON("panics", `{"color":"panic"}`))
		if s := r.status(t); r.code != 500 || !strings.Contains(s.Message, "panicked") {
			t.Errorf("POST whose validator panics = %d %q, want 500 saying it panicked", r.code, s.Message)
		}
	})

	t.Run("warnings reach the client", func(t *testing.T) {
		r := testRequest(t, f.cfg, "POST", gadgets, gadgetJSON("pale", `{"color":"pale"}`))
		want := `299 - "color \"pale\" is hard to see (asked by kctl-admin)"`
		if r.code != 201 || len(r.warnings) != 1 || r.warnings[0] != want {
			t.Errorf("POST = %d with warnings %q, want 201 and [%s]", r.code, r.warnings, want)
		}
	})

	t.Run("dry run is seen", func(t *testing.T) {
		if r := testRequest(t, f.cfg, "POST", gadgets+"?dryRun=All", gadgetJSON("dry", `{"color":"dry"}`)); r.code != 403 || !strings.Contains(r.status(t).Message, "dry run seen") {
			t.Errorf("dry-run POST = %d %s, want 403 dry run seen", r.code, r.body)
		}
		if r := testRequest(t, f.cfg, "POST", gadgets, gadgetJSON("dry", `{"color":"dry"}`)); r.code != 201 {
			t.Errorf("POST = %d %s, want 201", r.code, r.body)
		}
	})

	t.Run("defaulting changes exactly the fields the function set", func(t *testing.T) {
		r := testRequest(t, f.cfg, "POST", gadgets, `{"apiVersion":"webhook.kctl.dev/v1","kind":"Gadget",
			"metadata":{"name":"defaults","annotations":{"keep":"me"}},
			"spec":{"color":"green","extra":{"unknown":"to the Go type"},"list":[1,2]}}`)
		if r.code != 201 {
			t.Fatalf("POST = %d %s", r.code, r.body)
		}
		var got struct {
			Metadata struct {
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
			Spec map[string]any `json:"spec"`
		}
		json.Unmarshal(r.body, &got)
		wantSpec := map[string]any{"color": "green", "size": 1.0, "extra": map[string]any{"unknown": "to the Go type"}, "list": []any{1.0, 2.0}}
		if !reflect.DeepEqual(got.Spec, wantSpec) {
			t.Errorf("spec stored = %v, want %v", got.Spec, wantSpec)
		}
		if !maps.Equal(got.Metadata.Labels, map[string]string{"defaulted": "true"}) || !maps.Equal(got.Metadata.Annotations, map[string]string{"keep": "me"}) {
			t.Errorf("labels %v and annotations %v, want only the label defaulted=true added", got.Metadata.Labels, got.Metadata.Annotations)
		}
		r = testRequest(t, f.cfg, "POST", gadgets, gadgetJSON("refused", `{"color":"refuse"}`))
		if s := r.status(t); r.code != 403 || !strings.HasSuffix(s.Message, "denied the request: no default for refuse") {
			t.Errorf("POST whose defaulting fails = %d %q, want 403 with its message", r.code, s.Message)
		}
	})

	t.Run("UPDATE sees the old object, DELETE only it", func(t *testing.T) {
		r := testRequest(t, f.cfg, "POST", gadgets, gadgetJSON("locked", `{"color":"locked"}`))
		if r.code != 201 {
			t.Fatalf("POST = %d %s", r.code, r.body)
		}
		var obj map[string]any
		json.Unmarshal(r.body, &obj)
		obj["spec"] = map[string]any{"color": "blue"}
		body, _ := json.Marshal(obj)
		r = testRequest(t, f.cfg, "PUT", gadgets+"/locked", string(body))
		want := `denied the request: locked was locked (color "locked"), not "blue"`
		if s := r.status(t); r.code != 403 || !strings.HasSuffix(s.Message, want) {
			t.Errorf("PUT = %d %q, want 403 ending %q", r.code, s.Message, want)
		}
		r = testRequest(t, f.cfg, "DELETE", gadgets+"/locked", "")
		want = `denied the request: locked (color "locked") may not be deleted`
		if s := r.status(t); r.code != 403 || !strings.HasSuffix(s.Message, want) {
			t.Errorf("DELETE = %d %q, want 403 ending %q", r.code, s.Message, want)
		}
	})

	t.Run("metrics count the requests by code", func(t *testing.T) {
		page := f.page()
		want := `controller_runtime_webhook_requests_total{code="200",webhook="/validate-webhook-kctl-dev-v1-gadget"}`
		if !strings.Contains(page, want) {
			t.Errorf("the metrics page lacks %s", want)
		}
	})
}

// denyConfigMapsNamedDeny serves, on f, a validating webhook for
// ConfigMaps that denies those whose name starts with "deny-". It holds
// those whose name starts with "slow-" until the test has the API
// server's answer (release is closed): an answer at the end of the
// function's context, which ends at the same timeout as the API server's
// wait, could reach a busy API server in time (it did: 201 under load 8).
// ended says how the context ended.
func denyConfigMapsNamedDeny(f *webhookFixture) (release chan struct{}, ended chan error) {
	release = make(chan struct{})
	ended = make(chan error, 1)
	Validate(f.hooks, func(ctx context.Context, req AdmissionRequest[corev1.ConfigMap]) ([]string, error) {
		switch {
		case strings.HasPrefix(req.Name, "deny-"):
			return nil, errors.New("denied by name")
		case strings.HasPrefix(req.Name, "slow-"):
			<-ctx.Done()
			ended <- ctx.Err()
			<-release
		}
		return nil, nil
	})
	return release, ended
}

// untilDenied creates ConfigMaps named deny-<n> in ns until one is
// denied by name: the configuration holding the live webhook is in effect.
func untilDenied(t *testing.T, f *webhookFixture, ns string) {
	t.Helper()
	i := 0
	eventually(t, "the webhook configuration in effect", func() bool {
		i++
		r := testRequest(t, f.cfg, "POST", "/api/v1/namespaces/"+ns+"/configmaps", fmt.Sprintf(`{"metadata":{"name":"deny-%d"}}`, i))
		return r.code == 403 && strings.HasSuffix(r.status(t).Message, "denied by name")
	})
}

// TestWebhooks_RealAPIServer_DenialsHoldUnderFailurePolicyIgnore: kctl
// answers every denial (an error, a panic, an object that does not decode
// into T) as a review that denies, never as a failed call, so the API
// server denies even under failurePolicy Ignore, which admits a request
// whose webhook call fails. A denial written as an HTTP error, or a panic
// left to net/http, would admit the object here.
func TestWebhooks_RealAPIServer_DenialsHoldUnderFailurePolicyIgnore(t *testing.T) {
	f := newWebhookFixture(t)
	installGadgetCRD(t, f.cfg, f.ns)
	Validate(f.hooks, func(ctx context.Context, req AdmissionRequest[gadget]) ([]string, error) {
		switch req.Object.Spec.Color {
		case "forbidden":
			return nil, errors.New("forbidden by the validator")
		case "panic":
			panic("the validator panicked on purpose")
		}
		return []string{"validated"}, nil
	})
	Default(f.hooks, func(ctx context.Context, g *gadget) error {
		switch g.Spec.Color {
		case "refuse":
			return errors.New("refused by the defaulter")
		case "panic-default":
			panic("the defaulter panicked on purpose")
		}
		g.Spec.Size = max(g.Spec.Size, 1)
		return nil
	})
	f.start(t)
	hook := func(name, path string) webhookConfig {
		return webhookConfig{name: name, url: "https://" + f.addr + path, caBundle: f.ca.PEM(), ns: f.ns,
			resource: "gadgets.webhook.kctl.dev", failurePolicy: "Ignore", timeout: 10}
	}
	defer applyWebhooks(t, f.cfg, "Validating", "validate.ignore.kctl.dev", hook("validate.ignore.kctl.dev", "/validate-webhook-kctl-dev-v1-gadget"))()
	defer applyWebhooks(t, f.cfg, "Mutating", "mutate.ignore.kctl.dev", hook("mutate.ignore.kctl.dev", "/mutate-webhook-kctl-dev-v1-gadget"))()
	gadgets := "/apis/webhook.kctl.dev/v1/namespaces/" + f.ns + "/gadgets"
	i := 0
	eventually(t, "both webhooks in effect", func() bool { // seen without a denial
		i++
		r := testRequest(t, f.cfg, "POST", gadgets, gadgetJSON(fmt.Sprintf("probe-%d", i), `{}`))
		return r.code == 201 && strings.Contains(string(r.body), `"size":1`) && len(r.warnings) == 1
	})
	for _, tc := range []struct {
		spec    string
		code    int
		message string // the end of the Status's message
	}{
		{`{"color":"forbidden"}`, 403, `admission webhook "validate.ignore.kctl.dev" denied the request: forbidden by the validator`},
		{`{"color":"panic"}`, 500, `admission webhook "validate.ignore.kctl.dev" denied the request: kctl: the validating webhook panicked: the validator panicked on purpose`},
		{`{"color":"refuse"}`, 403, `admission webhook "mutate.ignore.kctl.dev" denied the request: refused by the defaulter`},
		{`{"color":"panic-default"}`, 500, `admission webhook "mutate.ignore.kctl.dev" denied the request: kctl: the defaulting webhook panicked: the defaulter panicked on purpose`},
		{`{"size":"big"}`, 400, `admission webhook "mutate.ignore.kctl.dev" denied the request: kctl: the review's object does not decode into`},
	} {
		r := testRequest(t, f.cfg, "POST", gadgets, gadgetJSON("denied", tc.spec))
		if r.code == 201 {
			t.Errorf("POST %s under failurePolicy Ignore = 201, admitted; want %d denied", tc.spec, tc.code)
			testRequest(t, f.cfg, "DELETE", gadgets+"/denied", "")
			continue
		}
		s := r.status(t)
		if r.code != tc.code || !strings.Contains(s.Message, tc.message) {
			t.Errorf("POST %s under failurePolicy Ignore = %d %q, want %d containing %q", tc.spec, r.code, s.Message, tc.code, tc.message)
		}
	}
}

// TestWebhooks_RealAPIServer_SlowWebhookHitsTimeout: a webhook that does
// not answer within the configuration's timeoutSeconds fails the request
// (failurePolicy Fail) after about that long, and its handler's context
// ends.
func TestWebhooks_RealAPIServer_SlowWebhookHitsTimeout(t *testing.T) {
	f := newWebhookFixture(t)
	release, ended := denyConfigMapsNamedDeny(f)
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	defer free()
	f.start(t)
	w := webhookConfig{name: "slow.kctl.dev", url: "https://" + f.addr + "/validate--v1-configmap",
		caBundle: f.ca.PEM(), ns: f.ns, resource: "configmaps", failurePolicy: "Fail", timeout: 1}
	defer applyWebhooks(t, f.cfg, "Validating", w.name, w)()
	untilDenied(t, f, f.ns)
	start := time.Now()
	r := testRequest(t, f.cfg, "POST", "/api/v1/namespaces/"+f.ns+"/configmaps", `{"metadata":{"name":"slow-1"}}`)
	took := time.Since(start)
	s := r.status(t)
	if r.code != 500 || !strings.Contains(s.Message, `failed calling webhook "slow.kctl.dev"`) || !strings.Contains(s.Message, "deadline exceeded") {
		t.Errorf("POST to a slow webhook = %d %q, want 500 failed calling webhook: context deadline exceeded", r.code, s.Message)
	}
	if took < time.Second || took > 10*time.Second {
		t.Errorf("the slow webhook failed the request after %v, want about its 1s timeout", took)
	}
	select {
	case err := <-ended:
		// The API server closing the connection (Canceled) or the
		// review's deadline, whichever comes first.
		if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("the slow webhook's context ended with %v, want Canceled or DeadlineExceeded", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("the slow webhook's context had not ended 10s after the API server's answer")
	}
	free()
	eventually(t, "the slow request out of flight", func() bool {
		page := f.page()
		return strings.Contains(page, `controller_runtime_webhook_requests_in_flight{webhook="/validate--v1-configmap"} 0`)
	})
}
