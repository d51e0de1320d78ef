package kctltest_test

// The wire client of the shared scenario (wire_scenario_test.go): raw
// HTTP to an Env's API server, as the admin, in JSON, and the lines a
// scenario compares.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kctl-dev/kctl/kctltest"
	"k8s.io/client-go/rest"
)

// wire is raw HTTP to an Env's API server, as the admin, in JSON.
type wire struct {
	t    *testing.T
	host string
	hc   *http.Client
	base string // the gadgets of the namespace
}

func newWire(t *testing.T, env *kctltest.Env, ns string) *wire {
	cfg := env.Config()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &wire{t: t, host: strings.TrimSuffix(cfg.Host, "/"), hc: hc, base: "/apis/kctltest.kctl.dev/v1/namespaces/" + ns + "/gadgets"}
}

// send sends a request as every Kubernetes client does: a 429 with a
// Retry-After is sent again after the time it asks for, for at most 10 s.
// A real API server answers 429 ("storage is (re)initializing") to a read of
// a resource whose watch cache is still being filled, as it is for a moment
// after its CRD is made; that is not what a scenario compares.
func (w *wire) send(ctx context.Context, method, path, contentType, body string) *http.Response {
	deadline := time.Now().Add(10 * time.Second)
	for {
		req, err := http.NewRequestWithContext(ctx, method, w.host+path, strings.NewReader(body))
		if err != nil {
			w.t.Fatal(err)
		}
		req.Header.Set("Accept", "application/json")
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := w.hc.Do(req)
		if err != nil {
			w.t.Fatal(err)
		}
		retryAfter := resp.Header.Get("Retry-After")
		if resp.StatusCode != http.StatusTooManyRequests || retryAfter == "" || time.Now().After(deadline) {
			return resp
		}
		seconds, err := strconv.Atoi(retryAfter)
		if err != nil || seconds < 1 {
			seconds = 1
		}
		resp.Body.Close()
		select {
		case <-time.After(time.Duration(seconds) * time.Second):
		case <-ctx.Done():
			w.t.Fatalf("%s %s: %v while waiting out a 429", method, path, ctx.Err())
		}
	}
}

// do sends a request and returns the status code and the decoded body.
func (w *wire) do(method, path, contentType, body string) (int, map[string]any) {
	resp := w.send(w.t.Context(), method, path, contentType, body)
	defer resp.Body.Close()
	var doc map[string]any
	json.NewDecoder(resp.Body).Decode(&doc)
	return resp.StatusCode, doc
}

// watch opens a watch with query q and returns a function that reads its
// next n events (but initial-end-less BOOKMARKs, which a server sends when
// it likes), as "TYPE name" lines, waiting at most 10 s, then closes it.
func (w *wire) watch(q string) func(n int) []string {
	ctx, cancel := context.WithCancel(w.t.Context())
	resp := w.send(ctx, "GET", w.base+"?watch=true&"+q, "", "")
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		return func(int) []string { return []string{fmt.Sprintf("HTTP %d %s", resp.StatusCode, statusOf(b))} }
	}
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		dec := json.NewDecoder(resp.Body)
		for {
			var ev struct {
				Type   string         `json:"type"`
				Object map[string]any `json:"object"`
			}
			if dec.Decode(&ev) != nil {
				return
			}
			lines <- eventLine(ev.Type, ev.Object)
		}
	}()
	return func(n int) []string {
		defer cancel()
		defer resp.Body.Close()
		var out []string
		deadline := time.After(10 * time.Second)
		for len(out) < n {
			select {
			case l, ok := <-lines:
				if !ok {
					return append(out, "(the watch ended)")
				}
				if l != "BOOKMARK" {
					out = append(out, l)
				}
			case <-deadline:
				return append(out, "(no more events in 10 s)")
			}
		}
		return out
	}
}

// until asks for path every 50 ms until done says yes to its answer, for
// at most 60 s, and tells whether it did: a cascade is asynchronous in a
// cluster (the garbage collector and the namespace controller act after the
// delete's answer) and done by then in memory.
func (w *wire) until(path string, done func(code int, doc map[string]any) bool) bool {
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, doc := w.do("GET", path, "", "")
		if done(code, doc) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-w.t.Context().Done():
			return false
		}
	}
}

func gone(code int, _ map[string]any) bool { return code == http.StatusNotFound }

func deleting(code int, doc map[string]any) bool {
	meta, _ := doc["metadata"].(map[string]any)
	return code == http.StatusOK && meta["deletionTimestamp"] != nil
}

// metaLine is what a scenario compares of an object's metadata.
func metaLine(doc map[string]any) string {
	meta, _ := doc["metadata"].(map[string]any)
	owners, _ := meta["ownerReferences"].([]any)
	return fmt.Sprintf("deleting=%t finalizers %v owners %d", meta["deletionTimestamp"] != nil, meta["finalizers"], len(owners))
}

func statusOf(b []byte) string {
	var st struct {
		Code   int    `json:"code"`
		Reason string `json:"reason"`
	}
	json.Unmarshal(b, &st)
	return fmt.Sprintf("%d %s", st.Code, st.Reason)
}

// eventLine is "TYPE name", with what a scenario compares of the object.
func eventLine(typ string, obj map[string]any) string {
	meta, _ := obj["metadata"].(map[string]any)
	switch typ {
	case "ERROR":
		return fmt.Sprintf("ERROR %v %v", obj["code"], obj["reason"])
	case "BOOKMARK":
		ann, _ := meta["annotations"].(map[string]any)
		if ann["k8s.io/initial-events-end"] == "true" {
			return "BOOKMARK initial-events-end"
		}
		return "BOOKMARK"
	}
	labels, _ := meta["labels"].(map[string]any)
	spec, _ := obj["spec"].(map[string]any)
	return fmt.Sprintf("%s %v app=%v size=%v deleting=%t", typ, meta["name"], labels["app"], spec["size"], meta["deletionTimestamp"] != nil)
}

// scaleLine is what a scenario compares of a Scale.
func scaleLine(doc map[string]any) string {
	spec, _ := doc["spec"].(map[string]any)
	status, _ := doc["status"].(map[string]any)
	return fmt.Sprintf("%v %v replicas %v, status replicas %v selector %v", doc["apiVersion"], doc["kind"], spec["replicas"], status["replicas"], status["selector"])
}
