// Package health holds a Manager's probe checks and serves them like
// kube-apiserver:
//
//	GET /readyz          200 "ok", or 503 listing every check, [-] on the failing ones
//	GET /readyz?verbose  every check with [+] or [-], also when all pass
//	GET /readyz/<check>  one check: 200 "ok", or 503 with its error
//	?exclude=<check>     skip a check (repeatable)
//
// and the same under /healthz for liveness checks. kctl's Manager adds its
// own checks and the user's (AddReadyCheck, AddHealthCheck) and serves
// Handler (ServeHealth).
package health

import (
	"net/http"
	"slices"
	"strings"
	"sync"
)

// Checks is a set of named readiness (/readyz) and liveness (/healthz)
// checks. The zero value is empty and ready to use; it is safe for
// concurrent use. Checks run on the request's goroutine, in the order
// added, without the lock held; they must honour r.Context().
type Checks struct {
	mu sync.Mutex
	// checks are in the order added; names are unique.
	checks []check
}

type check struct {
	name      string
	readiness bool
	run       func(r *http.Request) error
	// note, if set, is shown after "ok" (AddNoted).
	note func() string
}

// Add registers a readiness (/readyz) or liveness (/healthz) check.
// Adding a name again replaces the earlier check.
func (h *Checks) Add(
	name string,
	readiness bool,
	run func(r *http.Request) error,
) {
	h.AddNoted(name, readiness, run, nil)
}

// AddNoted is Add for a check whose passing line shows note's text after
// "ok", e.g. "[+]shard ok (group podcount, 3 members, 21/64 ranges, ...)";
// note may be nil.
func (h *Checks) AddNoted(
	name string,
	readiness bool,
	run func(r *http.Request) error,
	note func() string,
) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := check{name, readiness, run, note}
	sameName := func(other check) bool { return other.name == name }
	i := slices.IndexFunc(h.checks, sameName)
	if i >= 0 {
		h.checks[i] = c
	} else {
		h.checks = append(h.checks, c)
	}
}

// Handler serves /healthz, /readyz, /healthz/<check> and /readyz/<check>;
// any other path is 404. A failing check's error text is shown only with
// ?verbose, as kube-apiserver and controller-runtime do: otherwise it reads
// "[-]<check> failed: reason withheld", so that a probe's answer (which the
// kubelet records in events) tells nothing of the cluster. That is no
// access control: ?verbose shows the reasons (error texts, which may name
// objects and hosts) to any caller who can reach the endpoint, so serve the
// probes on a port that only the kubelet and the Pod's own users reach,
// never behind a Service or an Ingress.
func (h *Checks) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path := strings.TrimPrefix(r.URL.Path, "/")
		endpoint, one, _ := strings.Cut(path, "/")
		if endpoint != "readyz" && endpoint != "healthz" {
			http.NotFound(w, r)
			return
		}
		readiness := endpoint == "readyz"
		skip := func(c check) bool {
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
			err := c.run(r)
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
func noted(c check) string {
	if c.note == nil {
		return ""
	}
	return " (" + c.note() + ")"
}
