package prom

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// Family is one metric with label names: a Series per set of label
// values, made on first use by With. Every series has one value per label
// name, and a histogram family's series each have a Histogram with the
// family's Buckets.
//
// Set the exported fields, then use the family; do not change them after.
// The zero value is a gauge family without a name; a Family is safe for
// concurrent use.
type Family struct {
	Name string
	// Type is "counter", "gauge" or "histogram".
	Type   string
	Help   string
	Labels []string
	// Buckets are a histogram's upper bounds, as NewHistogram takes them.
	Buckets []float64
	// Mistake, if not nil, is told of each mistake in a call to With:
	// the wrong number of label values, a value that is not UTF-8.
	Mistake func(what string)

	mu sync.Mutex
	// series are by label values joined with "\xff", a byte that is
	// never in UTF-8 text.
	series map[string]*Series
}

// Series is one series of a Family: a counter's or gauge's value, or a
// histogram. It is safe for concurrent use, and takes no lock.
type Series struct {
	labels []string // name, value pairs, for the page
	value  atomicFloat
	hist   *Histogram // a histogram family's; nil otherwise
}

// Add adds v to a counter's or gauge's value.
func (s *Series) Add(v float64) { s.value.add(v) }

// Set sets a gauge's value.
func (s *Series) Set(v float64) { s.value.set(v) }

// Observe counts v in a histogram family's series. Call it on those only.
func (s *Series) Observe(v float64) { s.hist.Observe(v) }

// With returns the series for values, one per label name, making it on
// first use. Missing values are "" and extra ones are dropped, and bytes
// that are not UTF-8 become U+FFFD (a page is UTF-8); each such mistake
// is told to Mistake.
func (f *Family) With(values []string) *Series {
	values = f.fit(values)
	key := strings.Join(values, "\xff")
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.series[key]
	if s != nil {
		return s
	}
	s = &Series{}
	for i, l := range f.Labels {
		s.labels = append(s.labels, l, values[i])
	}
	if f.Type == "histogram" {
		s.hist = NewHistogram(f.Buckets)
	}
	if f.series == nil {
		f.series = map[string]*Series{}
	}
	f.series[key] = s
	return s
}

// fit returns values as With uses them: one per label name, all UTF-8.
// It never changes the caller's slice.
func (f *Family) fit(values []string) []string {
	want := len(f.Labels)
	if len(values) != want {
		f.mistake(fmt.Sprintf("got %d label values %q, want %d, for %q: "+
			"missing values are \"\", extra ones dropped",
			len(values), values, want, f.Labels))
		padded := make([]string, want)
		copy(padded, values)
		values = padded
	}
	for i, v := range values {
		if utf8.ValidString(v) {
			continue
		}
		f.mistake(fmt.Sprintf("label value %q is not UTF-8: "+
			"its bad bytes are shown as U+FFFD", v))
		values = slices.Clone(values)
		values[i] = strings.ToValidUTF8(v, "\uFFFD")
	}
	return values
}

func (f *Family) mistake(what string) {
	if f.Mistake != nil {
		f.Mistake(what)
	}
}

// SampleNames are the names of f's sample lines on a page: a histogram
// takes four.
func (f *Family) SampleNames() []string {
	if f.Type != "histogram" {
		return []string{f.Name}
	}
	return []string{
		f.Name,
		f.Name + "_bucket",
		f.Name + "_sum",
		f.Name + "_count",
	}
}

// collect adds f's series to p.
func (f *Family) collect(p *Page) {
	f.mu.Lock()
	series := slices.Collect(maps.Values(f.series))
	f.mu.Unlock()
	for _, s := range series {
		switch f.Type {
		case "counter":
			v := s.value.load()
			p.Counter(f.Name, f.Help, v, s.labels...)
		case "gauge":
			v := s.value.load()
			p.Gauge(f.Name, f.Help, v, s.labels...)
		case "histogram":
			p.Histogram(f.Name, f.Help, s.hist, s.labels...)
		}
	}
}

// Registry is a set of families whose sample names do not overlap. The
// zero value is empty; it is safe for concurrent use.
type Registry struct {
	mu       sync.Mutex
	families map[string]*Family // by name
	// taken are the SampleNames of every family.
	taken map[string]bool
}

// Add adds f unless one of its sample names is taken, and returns the
// first that is ("" when f was added).
func (r *Registry) Add(f *Family) (taken string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	names := f.SampleNames()
	for _, s := range names {
		if r.taken[s] {
			return s
		}
	}
	if r.families == nil {
		r.families = map[string]*Family{}
		r.taken = map[string]bool{}
	}
	for _, s := range names {
		r.taken[s] = true
	}
	r.families[f.Name] = f
	return ""
}

// Collect adds every family's series to p.
func (r *Registry) Collect(p *Page) {
	r.mu.Lock()
	families := slices.Collect(maps.Values(r.families))
	r.mu.Unlock()
	for _, f := range families {
		f.collect(p)
	}
}
