package kctl

// An extra: ServeHealth, the /healthz and /readyz endpoints over the
// Manager's health checks (manager.go).

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/kctl-dev/kctl/internal/serve"
)

// ServeHealth serves the probes /healthz and /readyz on addr while the
// Manager runs, e.g. "127.0.0.1:8081". /readyz is 200 once every
// controller's cache has synced and every AddReadyCheck passes. It is Add of
// a Runnable named "health", so call it before Start; "" adds nothing.
// Probes are off unless you call it.
func (m *Manager) ServeHealth(addr string) error {
	if addr == "" {
		return nil
	}
	spec := serve.Spec{
		Name:    "health",
		Addr:    addr,
		Handler: m.health.handler(),
		Read:    5 * time.Second,
		Write:   10 * time.Second,
	}
	return m.Add(m.runnable(spec))
}

// AddNotedReadyCheck is AddReadyCheck for a check whose passing line on
// /readyz?verbose shows note's text after "ok", e.g. "[+]webhook-certificate
// ok (serving a certificate for ... until ...)". note runs on the
// request's goroutine, as check does.
func (m *Manager) AddNotedReadyCheck(
	name string,
	check func(r *http.Request) error,
	note func() string,
) {
	m.health.addNoted(name, true, check, note)
}

// handler serves /healthz, /readyz, /healthz/<check> and /readyz/<check>;
// any other path is 404. A failing check's error text is shown only with
// ?verbose, as kube-apiserver and controller-runtime do: otherwise it reads
// "[-]<check> failed: reason withheld", so that a probe's answer (which the
// kubelet records in events) tells nothing of the cluster. That is no
// access control: ?verbose shows the reasons (error texts, which may name
// objects and hosts) to any caller who can reach the endpoint, so serve the
// probes on a port that only the kubelet and the Pod's own users reach,
// never behind a Service or an Ingress.
func (h *healthChecks) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path := strings.TrimPrefix(r.URL.Path, "/")
		endpoint, one, _ := strings.Cut(path, "/")
		if endpoint != "readyz" && endpoint != "healthz" {
			http.NotFound(w, r)
			return
		}
		readiness := endpoint == "readyz"
		skip := func(c healthCheck) bool {
			otherKind := c.readiness != readiness
			notAsked := one != "" && c.name != one
			return otherKind || notAsked
		}
		h.mu.Lock()
		checks := slices.DeleteFunc(slices.Clone(h.checks), skip)
		h.mu.Unlock()
		if one != "" && len(checks) == 0 {
			http.Error(w, "kctl: no check named "+one, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		q := r.URL.Query()
		_, verbose := q["verbose"]
		failed := false
		b := ""
		for _, c := range checks {
			excluded := slices.Contains(q["exclude"], c.name)
			if one == "" && excluded {
				b += "[+]" + c.name + " excluded: ok\n"
				continue
			}
			err := c.check(r)
			if err == nil {
				b += "[+]" + c.name + " ok" + noted(c) + "\n"
				continue
			}
			failed = true
			msg := "reason withheld"
			if verbose {
				msg = strings.ReplaceAll(err.Error(), "\n", " ")
			}
			b += "[-]" + c.name + " failed: " + msg + "\n"
		}
		switch {
		case failed:
			w.WriteHeader(http.StatusServiceUnavailable)
			if one == "" {
				b += endpoint + " check failed\n"
			}
		case verbose && one == "":
			b += endpoint + " check passed\n"
		default:
			b = "ok"
		}
		w.Write([]byte(b))
	})
}

// noted is what a passing check shows after "ok": " (<note>)", or "".
func noted(c healthCheck) string {
	if c.note == nil {
		return ""
	}
	return " (" + c.note() + ")"
}

// addNoted is add for a check whose passing line shows note's text,
// e.g. "[+]shard ok (group podcount, 3 members, 21/64 ranges, ...)".
func (h *healthChecks) addNoted(
	name string,
	readiness bool,
	check func(r *http.Request) error,
	note func() string,
) {
	h.add(name, readiness, check)
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range h.checks {
		if h.checks[i].name == name {
			h.checks[i].note = note
		}
	}
}
