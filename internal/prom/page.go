package prom

import (
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// ContentType is the media type of a Page: the text format, version 0.0.4.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Page is one scrape: families by name, each a TYPE, a HELP and the
// series added to it. Every series of a family shares the type and help
// of the first one added. The zero value is an empty page; a Page is not
// safe for concurrent use.
type Page struct {
	families map[string]*family
}

// family is one family of a page.
type family struct {
	typ  string
	help string
	// series are each label set's sample lines, rendered, each line
	// ending in "\n"; a histogram's or summary's take several lines.
	series []string
}

// Counter adds a counter's series. labels are name, value pairs, written
// in the order given; the values must be UTF-8 (Family.With makes them so).
func (p *Page) Counter(name, help string, v float64, labels ...string) {
	line := sample(name, labelSet(labels), v)
	p.add(name, "counter", help, line)
}

// Gauge adds a gauge's series, as Counter does.
func (p *Page) Gauge(name, help string, v float64, labels ...string) {
	line := sample(name, labelSet(labels), v)
	p.add(name, "gauge", help, line)
}

// Histogram adds h's series: a name_bucket line per bound, +Inf included,
// with the count at or below it, then name_sum and name_count.
func (p *Page) Histogram(name, help string, h *Histogram, labels ...string) {
	l := labelSet(labels)
	open := openLabels(l)
	counts := h.cumulative()
	var b strings.Builder
	for i, n := range counts {
		le := formatFloat(h.bound(i))
		b.WriteString(name + "_bucket" + open)
		b.WriteString(`le="` + le + `"} `)
		b.WriteString(countLine(n))
	}
	b.WriteString(sample(name+"_sum", l, h.sum.load()))
	total := counts[len(counts)-1]
	b.WriteString(name + "_count" + l + " ")
	b.WriteString(countLine(total))
	p.add(name, "histogram", help, b.String())
}

// summary adds a summary's series: the value at each quantile, then the
// sum and the count.
func (p *Page) summary(name, help string, s summary, labels ...string) {
	l := labelSet(labels)
	open := openLabels(l)
	var b strings.Builder
	for i, q := range s.quantiles {
		v := formatFloat(s.values[i])
		b.WriteString(name + open)
		b.WriteString(`quantile="` + formatFloat(q) + `"} `)
		b.WriteString(v + "\n")
	}
	b.WriteString(sample(name+"_sum", l, s.sum))
	b.WriteString(name + "_count" + l + " ")
	b.WriteString(countLine(s.count))
	p.add(name, "summary", help, b.String())
}

// summary is a summary's values: values[i] is at quantiles[i].
type summary struct {
	quantiles []float64
	values    []float64
	sum       float64
	count     uint64
}

// add appends series to the family name, making it on first use.
func (p *Page) add(name, typ, help, series string) {
	if p.families == nil {
		p.families = map[string]*family{}
	}
	f := p.families[name]
	if f == nil {
		f = &family{typ: typ, help: help}
		p.families[name] = f
	}
	f.series = append(f.series, series)
}

// WriteTo writes the page: per family, sorted by name, a HELP and a TYPE
// line, then its series, sorted.
func (p *Page) WriteTo(w io.Writer) (int64, error) {
	var b strings.Builder
	names := slices.Sorted(maps.Keys(p.families))
	for _, name := range names {
		f := p.families[name]
		slices.Sort(f.series)
		help := escapeHelp(f.help)
		b.WriteString("# HELP " + name + " " + help + "\n")
		b.WriteString("# TYPE " + name + " " + f.typ + "\n")
		for _, s := range f.series {
			b.WriteString(s)
		}
	}
	n, err := io.WriteString(w, b.String())
	return int64(n), err
}

// Handler serves the page that collect returns, calling it once per
// request.
func Handler(collect func() *Page) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", ContentType)
		collect().WriteTo(w)
	})
}

// sample renders one sample line: name, the label set l, the value.
func sample(name, l string, v float64) string {
	return name + l + " " + formatFloat(v) + "\n"
}

// labelSet renders name, value pairs as {a="x",b="y"}, or "" for none.
func labelSet(labels []string) string {
	var pairs []string
	for i := 0; i+1 < len(labels); i += 2 {
		v := escapeLabel(labels[i+1])
		pairs = append(pairs, labels[i]+`="`+v+`"`)
	}
	if len(pairs) == 0 {
		return ""
	}
	return "{" + strings.Join(pairs, ",") + "}"
}

// openLabels returns the label set l open for one more label: `{a="x",`,
// or `{` when l is "".
func openLabels(l string) string {
	if l == "" {
		return "{"
	}
	return strings.TrimSuffix(l, "}") + ","
}

var (
	// labelEscaper escapes a label value: backslash, quote, newline.
	labelEscaper = strings.NewReplacer(
		`\`, `\\`,
		`"`, `\"`,
		"\n", `\n`,
	)
	// helpEscaper escapes a HELP text: backslash, newline.
	helpEscaper = strings.NewReplacer(
		`\`, `\\`,
		"\n", `\n`,
	)
)

func escapeLabel(s string) string { return labelEscaper.Replace(s) }

func escapeHelp(s string) string { return helpEscaper.Replace(s) }

// formatFloat writes a value as Prometheus' Go client does: "1e-06",
// "+Inf", "NaN".
func formatFloat(f float64) string {
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// countLine writes a count and ends the line.
func countLine(n uint64) string {
	return strconv.FormatUint(n, 10) + "\n"
}
