package prom

import (
	"bytes"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestPage_FamiliesAndSeriesInAnyOrder_WrittenSortedWithHelpAndType(t *testing.T) {
	h := NewHistogram([]float64{0.1, 1})
	h.Observe(0.05)
	h.Observe(0.1) // le is inclusive
	h.Observe(3)
	p := &Page{}
	help := "A gauge.\nSecond line with a \\."
	p.Gauge("b_gauge", help, 2.5, "x", "2")
	p.Counter("a_total", "A counter.", 7, "k", "v")
	p.Gauge("b_gauge", help, math.Inf(-1), "x", "1")
	p.Histogram("c_seconds", "A histogram.", h,
		"controller", `q"uote`, "name", "back\\slash\nnewline")
	var b bytes.Buffer
	n, err := p.WriteTo(&b)
	if err != nil {
		t.Fatal(err)
	}
	want := `# HELP a_total A counter.
# TYPE a_total counter
a_total{k="v"} 7
# HELP b_gauge A gauge.\nSecond line with a \\.
# TYPE b_gauge gauge
b_gauge{x="1"} -Inf
b_gauge{x="2"} 2.5
# HELP c_seconds A histogram.
# TYPE c_seconds histogram
c_seconds_bucket{controller="q\"uote",name="back\\slash\nnewline",le="0.1"} 2
c_seconds_bucket{controller="q\"uote",name="back\\slash\nnewline",le="1"} 2
c_seconds_bucket{controller="q\"uote",name="back\\slash\nnewline",le="+Inf"} 3
c_seconds_sum{controller="q\"uote",name="back\\slash\nnewline"} 3.15
c_seconds_count{controller="q\"uote",name="back\\slash\nnewline"} 3
`
	if got := b.String(); got != want {
		t.Errorf("page:\n%s\nwant:\n%s", got, want)
	}
	if n != int64(len(want)) {
		t.Errorf("WriteTo = %d bytes, want %d", n, len(want))
	}
}

func TestPage_Summary_QuantilesSumAndCount(t *testing.T) {
	p := &Page{}
	s := summary{
		quantiles: []float64{0, 0.5, 1},
		values:    []float64{1e-05, 0.25, 3},
		sum:       4.5,
		count:     7,
	}
	p.summary("s_seconds", "A summary.", s, "x", "y")
	var b strings.Builder
	if _, err := p.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	want := `# HELP s_seconds A summary.
# TYPE s_seconds summary
s_seconds{x="y",quantile="0"} 1e-05
s_seconds{x="y",quantile="0.5"} 0.25
s_seconds{x="y",quantile="1"} 3
s_seconds_sum{x="y"} 4.5
s_seconds_count{x="y"} 7
`
	if got := b.String(); got != want {
		t.Errorf("page:\n%s\nwant:\n%s", got, want)
	}
}

func TestEscape_LabelValueAndHelp(t *testing.T) {
	for _, c := range []struct{ in, label, help string }{
		{`plain`, `plain`, `plain`},
		{`a"b`, `a\"b`, `a"b`},
		{`a\b`, `a\\b`, `a\\b`},
		{"a\nb", `a\nb`, `a\nb`},
		{`\n`, `\\n`, `\\n`}, // a literal backslash-n stays two characters
		{"ünï\tcode", "ünï\tcode", "ünï\tcode"},
	} {
		if got := escapeLabel(c.in); got != c.label {
			t.Errorf("escapeLabel(%q) = %q, want %q", c.in, got, c.label)
		}
		if got := escapeHelp(c.in); got != c.help {
			t.Errorf("escapeHelp(%q) = %q, want %q", c.in, got, c.help)
		}
	}
}

func TestHandler_ServesAFreshPageInTheTextFormat(t *testing.T) {
	scrapes := 0
	h := Handler(func() *Page {
		scrapes++
		p := &Page{}
		p.Counter("a_total", "A counter.", float64(scrapes))
		return p
	})
	for i, want := range []string{"a_total 1\n", "a_total 2\n"} {
		got := scrape(t, h)
		if !strings.HasSuffix(got, want) {
			t.Errorf("scrape %d:\n%s\nwant it to end in %q", i, got, want)
		}
	}
}

// scrape returns the body of GET /metrics from h, checking the status
// and the Content-Type.
func scrape(t *testing.T, h http.Handler) string {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/metrics", nil)
	h.ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Fatalf("GET /metrics = %d, want 200", rec.Code)
	}
	ct := rec.Header().Get("Content-Type")
	if ct != "text/plain; version=0.0.4; charset=utf-8" {
		t.Errorf("Content-Type = %q, want the text format 0.0.4", ct)
	}
	return rec.Body.String()
}
