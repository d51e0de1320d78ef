package prom

import (
	"fmt"
	"strings"
	"testing"
)

func TestFamily_With_OneSeriesPerValues_MistakesTold(t *testing.T) {
	var told []string
	f := &Family{
		Name:    "app_jobs_total",
		Type:    "counter",
		Help:    "Jobs.",
		Labels:  []string{"result", "queue"},
		Mistake: func(what string) { told = append(told, what) },
	}
	a := f.With([]string{"ok", "a"})
	if again := f.With([]string{"ok", "a"}); again != a {
		t.Errorf("With twice with the same values returned a new series")
	}
	values := []string{"bad\xff", "a"}
	f.With(values)
	if values[0] != "bad\xff" {
		t.Errorf("With changed the caller's values to %q", values)
	}
	short := f.With([]string{"ok"})
	long := f.With([]string{"ok", "", "extra"})
	if short != long {
		t.Errorf(`With("ok") and With("ok", "", "extra") are two series, want the one of "ok", ""`)
	}
	if len(told) != 3 {
		t.Errorf("Mistake told %d times, want 3: %q", len(told), told)
	}
	a.Add(2)
	page := collected(t, f.collect)
	for _, line := range []string{
		`app_jobs_total{result="ok",queue="a"} 2`,
		`app_jobs_total{result="ok",queue=""} 0`,
		"app_jobs_total{result=\"bad\uFFFD\",queue=\"a\"} 0",
	} {
		if !strings.Contains(page, line+"\n") {
			t.Errorf("page lacks %q:\n%s", line, page)
		}
	}
}

func TestRegistry_Add_HistogramTakesFourSampleNames(t *testing.T) {
	var r Registry
	h := &Family{Name: "app_wait_seconds", Type: "histogram", Help: "W."}
	if taken := r.Add(h); taken != "" {
		t.Fatalf("Add to an empty registry: %q taken", taken)
	}
	for _, name := range h.SampleNames() {
		g := &Family{Name: name, Type: "gauge", Help: "G."}
		if taken := r.Add(g); taken != name {
			t.Errorf("Add(gauge %s) = %q taken, want %q", name, taken, name)
		}
	}
	g := &Family{Name: "app_level", Type: "gauge", Help: "L."}
	if taken := r.Add(g); taken != "" {
		t.Errorf("Add(gauge app_level) = %q taken, want none", taken)
	}
	g.With(nil).Set(0.5)
	h.With(nil).Observe(1)
	page := collected(t, r.Collect)
	typ, _ := familyDocs(page)
	if fmt.Sprint(typ) != "map[app_level:gauge app_wait_seconds:histogram]" {
		t.Errorf("families on the page = %v, want the two added", typ)
	}
}
