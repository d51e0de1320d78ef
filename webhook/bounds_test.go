package webhook

// Issue 33, item 4: the webhook server bounds its work: requests in
// flight, each function's deadline, and a graceful shutdown.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/internal/certs"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
)

// reviewJSON is an AdmissionReview v1 of creating ConfigMap name.
func reviewJSON(name string) string {
	return fmt.Sprintf(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview",`+
		`"request":{"uid":%q,"operation":"CREATE","name":%q,"namespace":"default",`+
		`"object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q}}}}`, name, name, name)
}

// reviewAnswer is one answer of the webhook server to a review POSTed
// directly (not through the API server), or why there is none.
type reviewAnswer struct {
	code       int
	retryAfter string
	body       string
	err        error
}

// postReview POSTs body to the webhook server at url; it reports to the
// caller, never to t, so that a goroutine may call it.
func postReview(ctx context.Context, client *http.Client, url, body string) reviewAnswer {
	req, err := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	if err != nil {
		return reviewAnswer{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return reviewAnswer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reviewAnswer{code: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), body: string(b), err: err}
}

// allowed reports whether a is a 200 AdmissionReview that allows.
func (a reviewAnswer) allowed() bool {
	var review admissionReview
	if a.err != nil || a.code != 200 || json.Unmarshal([]byte(a.body), &review) != nil {
		return false
	}
	return review.Response != nil && review.Response.Allowed
}

// heldValidator is a validating function that holds the reviews of
// ConfigMaps named "held-*" until release is closed (or their context
// ends), telling entered of each, and allows everything.
type heldValidator struct {
	entered chan string
	release chan struct{}
	once    sync.Once
}

func newHeldValidator(t *testing.T) *heldValidator {
	v := &heldValidator{entered: make(chan string, 100), release: make(chan struct{})}
	t.Cleanup(v.releaseAll) // a test that fails early leaves nothing held
	return v
}

func (v *heldValidator) releaseAll() { v.once.Do(func() { close(v.release) }) }

func (v *heldValidator) validate(ctx context.Context, req AdmissionRequest[corev1.ConfigMap]) ([]string, error) {
	if strings.HasPrefix(req.Name, "held-") {
		v.entered <- req.Name
		select {
		case <-v.release:
		case <-ctx.Done():
		}
	}
	return nil, nil
}

// awaitEntered waits until n reviews are held, failing after 30 s.
func (v *heldValidator) awaitEntered(t *testing.T, n int) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for i := range n {
		select {
		case <-v.entered:
		case <-timeout:
			t.Fatalf("%d of %d reviews reached the function in 30s", i, n)
		}
	}
}

// TestWebhooks_InFlightLimit_429Beyond: with MaxInFlight(2) and two
// reviews held, a third is answered 429 with Retry-After, undecoded, and
// counted; the held ones are answered once released. Through the real API
// server, a 429 is retried, so the admission succeeds once a slot frees.
func TestWebhooks_InFlightLimit_429Beyond(t *testing.T) {
	f := newWebhookFixture(t)
	v := newHeldValidator(t)
	Validate(f.hooks, v.validate)
	f.hooks.MaxInFlight(2)
	f.start(t)
	client := webhookClient(f.ca)
	url := "https://" + f.addr + "/validate--v1-configmap"
	answers := make(chan reviewAnswer, 2)
	for i := range 2 {
		go func() { answers <- postReview(t.Context(), client, url, reviewJSON(fmt.Sprintf("held-%d", i))) }()
	}
	v.awaitEntered(t, 2)
	third := postReview(t.Context(), client, url, reviewJSON("third"))
	if third.err != nil || third.code != 429 || third.retryAfter != "1" || !strings.Contains(third.body, "MaxInFlight") {
		t.Errorf("a third review with 2 in flight and MaxInFlight(2) = %d (Retry-After %q) %q %v, want 429 with Retry-After 1 naming MaxInFlight",
			third.code, third.retryAfter, third.body, third.err)
	}
	v.releaseAll()
	for range 2 {
		if a := <-answers; !a.allowed() {
			t.Errorf("a held review = %d %q %v, want allowed once released", a.code, a.body, a.err)
		}
	}
	if a := postReview(t.Context(), client, url, reviewJSON("after")); !a.allowed() {
		t.Errorf("a review after the held ones = %d %q %v, want allowed", a.code, a.body, a.err)
	}
	page := f.page()
	want := `controller_runtime_webhook_requests_total{code="429",webhook="/validate--v1-configmap"} 1`
	if !strings.Contains(page, want) {
		t.Errorf("the metrics page lacks %s", want)
	}
}

// TestWebhooks_RealAPIServer_InFlightLimit_RetriedByAPIServer: with one
// review held and MaxInFlight(1), the API server's call for another
// object is answered 429, retried, and admitted once the held one ends.
func TestWebhooks_RealAPIServer_InFlightLimit_RetriedByAPIServer(t *testing.T) {
	f := newWebhookFixture(t)
	v := newHeldValidator(t)
	Validate(f.hooks, func(ctx context.Context, req AdmissionRequest[corev1.ConfigMap]) ([]string, error) {
		if strings.HasPrefix(req.Name, "deny-") {
			return nil, fmt.Errorf("denied by name")
		}
		return v.validate(ctx, req)
	})
	f.hooks.MaxInFlight(1)
	f.start(t)
	w := webhookConfig{name: "limit.kctl.dev", url: "https://" + f.addr + "/validate--v1-configmap",
		caBundle: f.ca.PEM(), ns: f.ns, resource: "configmaps", failurePolicy: "Fail", timeout: 20}
	defer applyWebhooks(t, f.cfg, "Validating", w.name, w)()
	untilDenied(t, f, f.ns)
	configmaps := "/api/v1/namespaces/" + f.ns + "/configmaps"
	create := func(name string) (apiResponse, error) {
		return tryRequest(t.Context(), f.cfg, "POST", configmaps, fmt.Sprintf(`{"metadata":{"name":%q}}`, name))
	}
	held := make(chan apiResponse, 1)
	heldErr := make(chan error, 1)
	go func() {
		r, err := create("held-1")
		held <- r
		heldErr <- err
	}()
	v.awaitEntered(t, 1)
	other := make(chan apiResponse, 1)
	otherErr := make(chan error, 1)
	go func() {
		r, err := create("other")
		other <- r
		otherErr <- err
	}()
	eventually(t, "the API server's call answered 429", func() bool {
		page := f.page()
		return strings.Contains(page, `controller_runtime_webhook_requests_total{code="429",webhook="/validate--v1-configmap"}`)
	})
	v.releaseAll()
	for _, r := range []struct {
		name string
		resp chan apiResponse
		err  chan error
	}{{"held-1", held, heldErr}, {"other", other, otherErr}} {
		resp, err := <-r.resp, <-r.err
		if err != nil || resp.code != 201 {
			t.Errorf("creating %s = %d %s %v, want 201", r.name, resp.code, resp.body, err)
		}
	}
}

// tryRequest is testRequest reporting to its caller instead of t, for
// goroutines.
func tryRequest(ctx context.Context, cfg *rest.Config, method, path, body string) (apiResponse, error) {
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return apiResponse{}, err
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(cfg.Host, "/")+path, strings.NewReader(body))
	if err != nil {
		return apiResponse{}, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return apiResponse{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return apiResponse{code: resp.StatusCode, body: b, warnings: resp.Header.Values("Warning")}, err
}

// TestWebhooks_FunctionDeadline_IsTheReviewsTimeout: a function's
// context has the deadline the request's timeout parameter gives (the
// webhook's timeoutSeconds), 10 s when it is absent or not a duration,
// 30 s at most.
func TestWebhooks_FunctionDeadline_IsTheReviewsTimeout(t *testing.T) {
	f := newWebhookFixture(t)
	deadlines := make(chan time.Duration, 1)
	Validate(f.hooks, func(ctx context.Context, req AdmissionRequest[corev1.ConfigMap]) ([]string, error) {
		deadline, ok := ctx.Deadline()
		if !ok {
			deadlines <- -1
			return nil, nil
		}
		deadlines <- time.Until(deadline)
		return nil, nil
	})
	f.start(t)
	client := webhookClient(f.ca)
	for _, tc := range []struct {
		query string
		want  time.Duration
	}{
		{"", 10 * time.Second},
		{"?timeout=3s", 3 * time.Second},
		{"?timeout=45s", 30 * time.Second},
		{"?timeout=soon", 10 * time.Second},
		{"?timeout=-1s", 10 * time.Second},
	} {
		a := postReview(t.Context(), client, "https://"+f.addr+"/validate--v1-configmap"+tc.query, reviewJSON("cm"))
		if !a.allowed() {
			t.Fatalf("%q: %d %q %v, want allowed", tc.query, a.code, a.body, a.err)
		}
		left := <-deadlines
		if left > tc.want || left < tc.want-2*time.Second {
			t.Errorf("with %q the function's context has %v left, want a deadline %v after the request (-1: none)", tc.query, left, tc.want)
		}
	}
}

// TestWebhooks_RealAPIServer_StuckFunction_ContextEndsAtTimeout: a
// function that waits for its context, called by the real API server for
// a webhook of timeoutSeconds 2, has a deadline 2 s away and sees its
// context end then (the API server, whose 2 s began first, may hang up
// just before: the context then ends as Canceled); the API server's
// request succeeds under Ignore.
func TestWebhooks_RealAPIServer_StuckFunction_ContextEndsAtTimeout(t *testing.T) {
	f := newWebhookFixture(t)
	type ended struct {
		left, after time.Duration // the deadline's distance at the call; when it ended
		err         error
	}
	stuck := make(chan ended, 10)
	Validate(f.hooks, func(ctx context.Context, req AdmissionRequest[corev1.ConfigMap]) ([]string, error) {
		if strings.HasPrefix(req.Name, "deny-") {
			return nil, fmt.Errorf("denied by name")
		}
		if req.Name != "stuck" {
			return nil, nil
		}
		start := time.Now()
		left := time.Duration(-1)
		if deadline, ok := ctx.Deadline(); ok {
			left = time.Until(deadline)
		}
		<-ctx.Done()
		stuck <- ended{left, time.Since(start), ctx.Err()}
		return nil, nil
	})
	f.start(t)
	w := webhookConfig{name: "stuck.kctl.dev", url: "https://" + f.addr + "/validate--v1-configmap",
		caBundle: f.ca.PEM(), ns: f.ns, resource: "configmaps", failurePolicy: "Ignore", timeout: 2}
	defer applyWebhooks(t, f.cfg, "Validating", w.name, w)()
	untilDenied(t, f, f.ns)
	r, err := tryRequest(t.Context(), f.cfg, "POST", "/api/v1/namespaces/"+f.ns+"/configmaps", `{"metadata":{"name":"stuck"}}`)
	if err != nil || r.code != 201 {
		t.Errorf("creating stuck under Ignore = %d %s %v, want 201", r.code, r.body, err)
	}
	select {
	case e := <-stuck:
		if e.left < 1500*time.Millisecond || e.left > 2*time.Second || e.after < 1500*time.Millisecond || e.after > 2500*time.Millisecond {
			t.Errorf("the stuck function's context: its deadline %v away (-1ns: none), ended after %v with %v; want a deadline 2s away, ending then",
				e.left, e.after, e.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the stuck function's context did not end in 30s")
	}
}

// TestWebhooks_GracefulShutdown_AnswersInFlightFinish: reviews in flight
// when the Manager stops are answered (0 EOFs) once their functions
// return, after the server stopped listening, and Start returns within
// ShutdownTimeout.
func TestWebhooks_GracefulShutdown_AnswersInFlightFinish(t *testing.T) {
	ca, err := certs.NewCA("kctl webhook test")
	if err != nil {
		t.Fatal(err)
	}
	certDir := t.TempDir()
	if _, err := ca.WriteServing(certDir, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	addr := freeLoopbackAddr(t)
	mgr := testManager(t, noServer(), "default", kctl.Options{ShutdownTimeout: 10 * time.Second})
	hooks, err := Serve(mgr, addr, certDir)
	if err != nil {
		t.Fatal(err)
	}
	v := newHeldValidator(t)
	Validate(hooks, v.validate)
	stop := startManager(t, mgr)
	listening := func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	}
	eventually(t, "the webhook server listening", listening)
	client := webhookClient(ca)
	url := "https://" + addr + "/validate--v1-configmap"
	const n = 3
	answers := make(chan reviewAnswer, n)
	for i := range n {
		go func() {
			answers <- postReview(context.Background(), client, url, reviewJSON(fmt.Sprintf("held-%d", i)))
		}()
	}
	v.awaitEntered(t, n)
	stopped := make(chan error, 1)
	stopAt := time.Now()
	go func() { stopped <- stop() }()
	eventually(t, "the webhook server to stop listening", func() bool { return !listening() })
	v.releaseAll()
	eofs := 0
	for range n {
		a := <-answers
		if a.err != nil {
			eofs++
		}
		if !a.allowed() {
			t.Errorf("a review in flight at shutdown = %d %q %v, want allowed", a.code, a.body, a.err)
		}
	}
	if eofs > 0 {
		t.Errorf("%d of %d answers in flight at shutdown were lost, want 0", eofs, n)
	}
	if err := <-stopped; err != nil {
		t.Errorf("Start returned %v, want nil", err)
	}
	if took := time.Since(stopAt); took > 10*time.Second {
		t.Errorf("Start returned %v after its context ended, want within ShutdownTimeout 10s", took)
	}
}
