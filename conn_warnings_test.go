package kctl

// Issue 25, item 10: the API server's warnings (the Warning header) are
// logged once per distinct text through Options.Logger. The real server
// sends them for a CRD version marked deprecated and for a field its schema
// lacks (dropped from a write, fieldValidation Warn being the default).

import (
	"errors"
	"log"
	"log/slog"
	"net/http"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// warnWidget is served at v1beta1, deprecated, by warnWidgetCRD, whose
// schema has spec.size but not spec.color.
type warnWidget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              warnWidgetSpec `json:"spec"`
}

type warnWidgetSpec struct {
	Size  int    `json:"size,omitempty"`
	Color string `json:"color,omitempty"`
}

var _ = Declare[warnWidget](Resource{Group: "warnings.kctl.test", Version: "v1beta1", Kind: "WarnWidget", Plural: "warnwidgets", Namespaced: true})

const warnWidgetDeprecation = "warnings.kctl.test/v1beta1 WarnWidget is deprecated; use v1"

const warnWidgetCRD = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"warnwidgets.warnings.kctl.test"},
 "spec":{"group":"warnings.kctl.test","scope":"Namespaced",
  "names":{"plural":"warnwidgets","singular":"warnwidget","kind":"WarnWidget","listKind":"WarnWidgetList"},
  "versions":[{"name":"v1beta1","served":true,"storage":true,
   "deprecated":true,"deprecationWarning":"` + warnWidgetDeprecation + `",
   "schema":{"openAPIV3Schema":{"type":"object","properties":{
    "spec":{"type":"object","properties":{"size":{"type":"integer"}}}}}}}]}}`

func TestConn_ServerWarnings_LoggedOncePerText(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	defer testCRDAbsent(t, cfg, ns, "warnings.kctl.test", "v1beta1", "warnwidgets")()
	if code, body := testRawRequest(t, cfg, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", warnWidgetCRD); code != http.StatusCreated {
		t.Fatalf("creating the CRD: %d %s", code, body)
	}
	// Served as kctl sees it: the REST path and the discovery document
	// (which kctl reads on a 404) catch up at different times. Through a
	// Conn of its own, so that the Manager's logs hold only what follows.
	probe := NewClient[warnWidget](mustConn(t, cfg))
	eventually(t, "warnwidgets served", func() bool {
		_, err := probe.List(t.Context(), ListOptions{Namespace: ns})
		if err != nil && !errors.Is(err, ErrNotInstalled) {
			t.Fatalf("listing warnwidgets: %v", err)
		}
		return err == nil
	})

	mgr, logs, err := newLoggedManager(t, Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	widgets := NewClient[warnWidget](mgr.conn)
	for _, name := range []string{"a", "b"} {
		w := &warnWidget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: warnWidgetSpec{Size: 1, Color: "red"}}
		if err := widgets.Create(t.Context(), w); err != nil {
			t.Fatalf("Create %s: %v", name, err)
		}
	}
	for range 3 {
		if _, err := widgets.Get(t.Context(), ns, "a"); err != nil {
			t.Fatal(err)
		}
	}

	deprecated := logs.lines(`level=WARN msg="the API server warns" warning="` + warnWidgetDeprecation + `" request="POST /apis/warnings.kctl.test/v1beta1/namespaces/` + ns + `/warnwidgets"`)
	unknown := logs.lines(`level=WARN msg="the API server warns" warning="unknown field \"spec.color\""`)
	if len(deprecated) != 1 || len(unknown) != 1 || len(logs.lines("msg=")) != 2 {
		t.Errorf("logged:\n%s\nwant one line for the deprecation (with the first request) and one for spec.color", logs)
	}

	// A Conn made with NewConn logs to slog.Default(). SetDefault also
	// sends package log's output to it: put that back too.
	defaults := &logBuffer{}
	prev := slog.Default()
	prevOut := log.Writer()
	prevFlags := log.Flags()
	slog.SetDefault(slog.New(slog.NewTextHandler(defaults, nil)))
	conn, err := NewConn(cfg)
	slog.SetDefault(prev)
	log.SetOutput(prevOut)
	log.SetFlags(prevFlags)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := NewClient[warnWidget](conn).Get(t.Context(), ns, "a"); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(defaults.lines(`warning="` + warnWidgetDeprecation + `" request="GET /apis/warnings.kctl.test/v1beta1/namespaces/` + ns + `/warnwidgets/a"`)); n != 1 {
		t.Errorf("NewConn's Conn logged to slog.Default():\n%s\nwant the deprecation once", defaults)
	}
}
