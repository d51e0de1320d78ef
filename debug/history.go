// Package debug serves a Manager's internals for a person debugging a
// program, on loopback: each controller's reconcile history
// (ServeHistory, over kctl's KeepHistory and History) and Go's profiles
// (ServePprof). Both are off unless called, and a program that does not
// import this package links none of it.
package debug

// ServeHistory: the reconcile history over HTTP, as JSON and as a plain
// HTML page.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/internal/serve"
)

// ServeHistory serves each controller's reconcile history on addr while
// mgr runs, and turns KeepHistory on (with its defaults, unless called
// before):
//
//	GET /debug/kctl/controllers                  the controllers and their keys
//	GET /debug/kctl/controllers/NAME             one controller's keys, last result first
//	GET /debug/kctl/controllers/NAME?namespace=N&name=K  one key: its reconciles and state
//
// as an HTML page, or JSON with ?format=json. addr defaults to loopback:
// "" serves on "127.0.0.1:8082". It shows error texts and object names,
// so keep it on loopback or a Pod-internal address: listening on any
// other logs a warning at start. It answers only requests whose Host is
// a loopback name or address (localhost, at any port, as through kubectl
// port-forward), or the address it listens on or took the request on,
// and 421 Misdirected Request to others: a web page whose name is rebound
// to this address (DNS rebinding) cannot read it. It is mgr.Add of a
// Runnable named "debug", so call it before Start.
func ServeHistory(mgr *kctl.Manager, addr string) error {
	if addr == "" {
		addr = "127.0.0.1:8082"
	}
	mgr.KeepHistory(kctl.HistoryOptions{})
	spec := serve.Spec{
		Name:    "debug",
		Addr:    addr,
		Handler: historyHandler(mgr),
		Read:    30 * time.Second,
		Write:   time.Minute,
		Private: true,
	}
	return mgr.Add(runnable(spec))
}

// runnable is spec as a Runnable on every replica, logging to the
// Manager's logger.
func runnable(spec serve.Spec) kctl.Runnable {
	run := func(ctx context.Context) error {
		return spec.Serve(ctx, kctl.LoggerFrom(ctx))
	}
	return kctl.Runnable{Name: spec.Name, Run: run}
}

// historyHandler serves the pages ServeHistory lists.
func historyHandler(mgr *kctl.Manager) http.Handler {
	p := pages{mgr}
	mux := http.NewServeMux()
	const root = "/debug/kctl/controllers"
	mux.HandleFunc(root, p.controllers)
	mux.HandleFunc(root+"/{name}", p.controller)
	return mux
}

// pages are the history pages of a Manager.
type pages struct{ mgr *kctl.Manager }

// debugKeyLine is one key in a controller's list.
type debugKeyLine struct {
	Key        kctl.Key `json:"key"`
	Reconciles int      `json:"reconciles"`
	LastResult string   `json:"lastResult,omitempty"`
	LastError  string   `json:"lastError,omitempty"`
	Dropped    string   `json:"lastDropped,omitempty"`
}

// controllers serves the list of controllers.
func (p pages) controllers(w http.ResponseWriter, r *http.Request) {
	histories := p.mgr.Histories()
	names := slices.Sorted(maps.Keys(histories))
	counts := map[string]int{}
	for _, name := range names {
		counts[name] = len(histories[name])
	}
	if wantsJSON(r) {
		writeJSON(w, counts)
		return
	}
	var b strings.Builder
	b.WriteString(pageHead("kctl controllers"))
	header(&b, "controller", "keys with a history")
	for _, name := range names {
		link := "controllers/" + name
		row(&b, anchor(link, name), fmt.Sprint(counts[name]))
	}
	b.WriteString("</table></body></html>\n")
	writeHTML(w, b.String())
}

// controller serves one controller's keys, or one key's page.
func (p pages) controller(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	q := r.URL.Query()
	if q.Has("name") {
		k := kctl.Key{Namespace: q.Get("namespace"), Name: q.Get("name")}
		p.key(w, r, name, k)
		return
	}
	var lines []debugKeyLine
	for _, k := range p.mgr.Histories()[name] {
		h, err := p.mgr.History(name, k)
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		line := debugKeyLine{
			Key:        k,
			Reconciles: len(h.Reconciles),
			Dropped:    h.State.LastDropped,
		}
		if n := len(h.Reconciles); n > 0 {
			line.LastResult = h.Reconciles[n-1].Result
			line.LastError = h.Reconciles[n-1].Error
		}
		lines = append(lines, line)
	}
	if wantsJSON(r) {
		writeJSON(w, lines)
		return
	}
	var b strings.Builder
	b.WriteString(pageHead("kctl controller " + name))
	header(&b, "key", "reconciles", "last result",
		"last error", "last dropped by")
	for _, l := range lines {
		q := url.Values{}
		q.Set("namespace", l.Key.Namespace)
		q.Set("name", l.Key.Name)
		link := name + "?" + q.Encode()
		key := anchor(link, l.Key.String())
		n := fmt.Sprint(l.Reconciles)
		row(&b, key, n, esc(l.LastResult),
			esc(l.LastError), esc(l.Dropped))
	}
	b.WriteString("</table></body></html>\n")
	writeHTML(w, b.String())
}

// key serves one key's page: its state and its last reconciles.
func (p pages) key(w http.ResponseWriter, r *http.Request, name string, k kctl.Key) {
	h, err := p.mgr.History(name, k)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	if wantsJSON(r) {
		writeJSON(w, h)
		return
	}
	var b strings.Builder
	b.WriteString(pageHead("kctl " + name + " " + k.String()))
	b.WriteString("<h2>now</h2><ul>\n")
	for _, line := range stateLines(h.State) {
		fmt.Fprintf(&b, "<li>%s</li>\n", esc(line))
	}
	b.WriteString("</ul><h2>last reconciles, newest first</h2>\n")
	header(&b, "start", "trigger", "waited", "took",
		"attempt", "result", "requeue after", "error")
	for _, e := range slices.Backward(h.Reconciles) {
		trigger := e.Trigger + " " + e.Detail
		row(&b,
			e.Start.Format(time.RFC3339Nano),
			esc(strings.TrimSpace(trigger)),
			e.Waited.String(),
			e.Took.String(),
			fmt.Sprint(e.Attempt),
			esc(e.Result),
			e.RequeueAfter.String(),
			esc(e.Error))
	}
	b.WriteString("</table></body></html>\n")
	writeHTML(w, b.String())
}

// stateLines says where a key is now, one fact a line.
func stateLines(s kctl.KeyState) []string {
	var out []string
	if s.Queued {
		out = append(out, "queued ("+s.QueuedBy+")")
	}
	if !s.WaitingUntil.IsZero() {
		out = append(out, fmt.Sprintf("waiting until %s (%s)",
			s.WaitingUntil.Format(time.RFC3339Nano), s.WaitingFor))
	}
	if s.BackoffAttempt > 0 {
		out = append(out, fmt.Sprintf("in backoff, attempt %d", s.BackoffAttempt+1))
	}
	if !s.InFlightSince.IsZero() {
		out = append(out, "in flight since "+s.InFlightSince.Format(time.RFC3339Nano))
	}
	if s.LastDropped != "" {
		out = append(out, fmt.Sprintf("last event dropped by %s at %s",
			s.LastDropped, s.LastDroppedAt.Format(time.RFC3339Nano)))
	}
	if len(out) == 0 {
		out = append(out, "idle")
	}
	return out
}

// header starts a table with a row of column names.
func header(b *strings.Builder, names ...string) {
	b.WriteString("<table><tr>")
	for _, n := range names {
		b.WriteString("<th>" + esc(n) + "</th>")
	}
	b.WriteString("</tr>\n")
}

// row writes a table row of cells, which are HTML already.
func row(b *strings.Builder, cells ...string) {
	b.WriteString("<tr>")
	for _, c := range cells {
		b.WriteString("<td>" + c + "</td>")
	}
	b.WriteString("</tr>\n")
}

// anchor is a link to href showing text.
func anchor(href, text string) string {
	return "<a href=\"" + esc(href) + "\">" + esc(text) + "</a>"
}

// esc escapes s for HTML text and attribute values, as html.EscapeString
// does. Not the html package: its init would link its entity table, about
// 70 KB, into the program.
func esc(s string) string {
	r := strings.NewReplacer(
		"&", "&amp;",
		"'", "&#39;",
		"<", "&lt;",
		">", "&gt;",
		`"`, "&#34;",
	)
	return r.Replace(s)
}

func wantsJSON(r *http.Request) bool { return r.URL.Query().Get("format") == "json" }

func writeHTML(w http.ResponseWriter, page string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprint(w, page)
}

func pageHead(title string) string {
	t := esc(title)
	return "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>" + t +
		"</title></head><body><h1>" + t + "</h1>\n"
}

// writeJSON writes v as the answer.
func writeJSON(w http.ResponseWriter, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "kctl: encoding the answer: "+err.Error(),
			http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(data)
}
