package debug

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/internal/servetest"
)

// TestServePprof_ServesNetHTTPPprofPathsOnly: the pprof server logs its
// timeouts, answers net/http/pprof's paths and no other, and is not
// registered on http.DefaultServeMux.
func TestServePprof_ServesNetHTTPPprofPathsOnly(t *testing.T) {
	logs := &servetest.LogBuffer{}
	opts := kctl.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))}
	mgr := servetest.Manager(t, servetest.Config(t), servetest.Namespace(t), opts)
	addr := servetest.FreeAddr(t)
	if err := ServePprof(mgr, addr); err != nil {
		t.Fatal(err)
	}
	servetest.Start(t, mgr)
	line := logs.LinesEventually(t, `msg="serving pprof"`, 1)[0]
	if !strings.Contains(line, "readTimeout=10s writeTimeout=2m10s") {
		t.Errorf("the pprof server's serving line lacks its timeouts: %s", line)
	}
	for _, tc := range []struct {
		path string
		code int
		body string
	}{
		{"/debug/pprof/", 200, "heap"},
		{"/debug/pprof/heap?debug=1", 200, "heap profile"},
		{"/debug/pprof/goroutine?debug=2", 200, "goroutine "},
		{"/debug/pprof/nope", 404, "no profile named nope"},
		{"/metrics", 404, ""},
	} {
		if code, body := servetest.Get(t, addr, "", tc.path); code != tc.code || !strings.Contains(body, tc.body) {
			t.Errorf("GET %s = %d %.200q, want %d containing %q", tc.path, code, body, tc.code, tc.body)
		}
	}
	code, body := servetest.Get(t, addr, "", "/debug/pprof/profile?seconds=1")
	if code != 200 || !bytes.HasPrefix([]byte(body), []byte{0x1f, 0x8b}) {
		t.Errorf("GET a 1s CPU profile = %d, %d bytes, want 200 and a gzipped profile", code, len(body))
	}
	rec := httptest.NewRecorder()
	http.DefaultServeMux.ServeHTTP(rec, httptest.NewRequest("GET", "/debug/pprof/", nil))
	if rec.Code != 404 {
		t.Errorf("http.DefaultServeMux serves /debug/pprof/ (%d): kctl must not register on it", rec.Code)
	}
}
