package debug

// ServePprof: Go's profiles over HTTP as net/http/pprof serves them.

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"time"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/internal/serve"
)

// ServePprof serves Go's profiles under /debug/pprof/ on addr while mgr
// runs, e.g. "127.0.0.1:6060", at net/http/pprof's paths, so that
// `go tool pprof http://127.0.0.1:6060/debug/pprof/heap` works:
//
//	/debug/pprof/                 the list of profiles
//	/debug/pprof/<name>?debug=N   heap, goroutine, allocs, block, mutex, threadcreate
//	/debug/pprof/profile?seconds=N  a CPU profile (default 30, at most 120)
//	/debug/pprof/trace?seconds=N    an execution trace (default 1, at most 120)
//
// Profiles show the program's internals and cost CPU to take: serve them
// on loopback and reach them with kubectl port-forward (listening on any
// other address logs a warning at start). Like ServeHistory, it answers
// 421 Misdirected Request to a Host that is neither a loopback name or
// address nor its own address, so that no web page can read it by DNS
// rebinding. It is mgr.Add of a Runnable named "pprof", so call it before
// Start; "" adds nothing, and profiling is off unless you call it. It
// does not import net/http/pprof, whose init registers it on
// http.DefaultServeMux in every program.
func ServePprof(mgr *kctl.Manager, addr string) error {
	if addr == "" {
		return nil
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", servePprof)
	spec := serve.Spec{
		Name:    "pprof",
		Addr:    addr,
		Handler: mux,
		Read:    10 * time.Second,
		Write:   maxProfile + 10*time.Second,
		Private: true,
	}
	return mgr.Add(runnable(spec))
}

// maxProfile bounds a CPU profile or trace.
const maxProfile = 2 * time.Minute

// servePprof serves one path under /debug/pprof/.
func servePprof(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/debug/pprof/")
	switch name {
	case "":
		pprofIndex(w)
	case "profile":
		timedProfile(w, r, 30, pprof.StartCPUProfile, pprof.StopCPUProfile)
	case "trace":
		timedProfile(w, r, 1, trace.Start, trace.Stop)
	default:
		namedProfile(w, r, name)
	}
}

// pprofIndex lists the profiles.
func pprofIndex(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	b := "profiles:\n"
	for _, p := range pprof.Profiles() {
		b += fmt.Sprintf("%d\t%s\t/debug/pprof/%s?debug=1\n",
			p.Count(), p.Name(), p.Name())
	}
	b += "-\tprofile\t/debug/pprof/profile?seconds=30\n"
	b += "-\ttrace\t/debug/pprof/trace?seconds=1\n"
	w.Write([]byte(b))
}

// namedProfile writes the profile name: binary, or as text with
// ?debug=1 or 2. ?gc=1 collects garbage first (for heap).
func namedProfile(w http.ResponseWriter, r *http.Request, name string) {
	p := pprof.Lookup(name)
	if p == nil {
		http.Error(w, "kctl: no profile named "+name+"; see /debug/pprof/",
			http.StatusNotFound)
		return
	}
	debug, _ := strconv.Atoi(r.FormValue("debug"))
	if r.FormValue("gc") == "1" {
		runtime.GC()
	}
	if debug == 0 {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition",
			`attachment; filename="`+name+`"`)
	} else {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	}
	p.WriteTo(w, debug)
}

// timedProfile runs start on w for ?seconds (def if absent; at most
// maxProfile, and no longer than the request lasts), then stop.
func timedProfile(
	w http.ResponseWriter,
	r *http.Request,
	def int,
	start func(w io.Writer) error,
	stop func(),
) {
	seconds, err := strconv.Atoi(r.FormValue("seconds"))
	if err != nil || seconds <= 0 {
		seconds = def
	}
	d := min(time.Duration(seconds)*time.Second, maxProfile)
	w.Header().Set("Content-Type", "application/octet-stream")
	err = start(w)
	if err != nil {
		http.Error(w, "kctl: cannot start profiling: "+err.Error(),
			http.StatusInternalServerError)
		return
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-r.Context().Done():
	}
	stop()
}
