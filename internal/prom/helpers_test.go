package prom

import (
	"strconv"
	"strings"
	"testing"
)

// collected returns the text of a page that collect adds to.
func collected(t *testing.T, collect func(*Page)) string {
	t.Helper()
	p := &Page{}
	collect(p)
	var b strings.Builder
	if _, err := p.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// samples returns a page's sample lines as series (name and labels) ->
// value.
func samples(page string) map[string]string {
	out := map[string]string{}
	for line := range strings.Lines(page) {
		if strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimSuffix(line, "\n")
		k, v, ok := strings.Cut(line, " ")
		if ok {
			out[k] = v
		}
	}
	return out
}

// familyDocs returns a page's families as name -> TYPE, and name -> HELP.
func familyDocs(page string) (typ, help map[string]string) {
	typ = map[string]string{}
	help = map[string]string{}
	for line := range strings.Lines(page) {
		line = strings.TrimSuffix(line, "\n")
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, t, _ := strings.Cut(rest, " ")
			typ[name] = t
		}
		if rest, ok := strings.CutPrefix(line, "# HELP "); ok {
			name, h, _ := strings.Cut(rest, " ")
			help[name] = h
		}
	}
	return typ, help
}

// value returns the value of series on page as a float, failing the test
// if it is missing.
func value(t *testing.T, page map[string]string, series string) float64 {
	t.Helper()
	s, ok := page[series]
	if !ok {
		t.Fatalf("page has no series %s", series)
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("%s = %q: %v", series, s, err)
	}
	return v
}
