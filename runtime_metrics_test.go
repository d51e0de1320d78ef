package kctl

import (
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// samples returns a page's sample lines as series (name and labels) -> value.
func samples(page string) map[string]string {
	out := map[string]string{}
	for line := range strings.Lines(page) {
		if k, v, ok := strings.Cut(strings.TrimSuffix(line, "\n"), " "); ok && !strings.HasPrefix(line, "#") {
			out[k] = v
		}
	}
	return out
}

// familyDocs returns a page's families as name -> TYPE, and name -> HELP.
func familyDocs(page string) (typ, help map[string]string) {
	typ, help = map[string]string{}, map[string]string{}
	for line := range strings.Lines(strings.TrimSpace(page)) {
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

// goCollectorFamilies are the families of client_golang's default Go
// collector (v1.20 and later) with their types.
var goCollectorFamilies = map[string]string{
	"go_goroutines": "gauge", "go_threads": "gauge", "go_info": "gauge",
	"go_gc_duration_seconds":           "summary",
	"go_memstats_last_gc_time_seconds": "gauge",
	"go_memstats_alloc_bytes":          "gauge", "go_memstats_alloc_bytes_total": "counter",
	"go_memstats_sys_bytes": "gauge", "go_memstats_mallocs_total": "counter", "go_memstats_frees_total": "counter",
	"go_memstats_heap_alloc_bytes": "gauge", "go_memstats_heap_sys_bytes": "gauge", "go_memstats_heap_idle_bytes": "gauge",
	"go_memstats_heap_inuse_bytes": "gauge", "go_memstats_heap_released_bytes": "gauge", "go_memstats_heap_objects": "gauge",
	"go_memstats_stack_inuse_bytes": "gauge", "go_memstats_stack_sys_bytes": "gauge",
	"go_memstats_mspan_inuse_bytes": "gauge", "go_memstats_mspan_sys_bytes": "gauge",
	"go_memstats_mcache_inuse_bytes": "gauge", "go_memstats_mcache_sys_bytes": "gauge",
	"go_memstats_buck_hash_sys_bytes": "gauge", "go_memstats_gc_sys_bytes": "gauge", "go_memstats_other_sys_bytes": "gauge",
	"go_memstats_next_gc_bytes": "gauge",
	"go_gc_gogc_percent":        "gauge", "go_gc_gomemlimit_bytes": "gauge", "go_sched_gomaxprocs_threads": "gauge",
}

func TestMetricsPage_GoFamilies_AsThePrometheusGoCollectorNamesThem(t *testing.T) {
	runtime.GC() // at least one pause to summarize
	page := scrapeMetrics(t, newMetrics().handler())
	typ, help := familyDocs(page)
	for name, want := range goCollectorFamilies {
		if typ[name] != want {
			t.Errorf("# TYPE %s = %q, want %q", name, typ[name], want)
		}
	}
	for name, want := range map[string]string{
		"go_goroutines":          "Number of goroutines that currently exist.",
		"go_gc_duration_seconds": "A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles.",
		"go_memstats_alloc_bytes": "Number of bytes allocated in heap and currently in use. " +
			"Equals to /memory/classes/heap/objects:bytes.",
		"go_gc_gogc_percent": "Heap size target percentage configured by the user, otherwise 100. This value is set by " +
			"the GOGC environment variable, and the runtime/debug.SetGCPercent function. Sourced from /gc/gogc:percent.",
	} {
		if help[name] != want {
			t.Errorf("# HELP %s = %q, want %q", name, help[name], want)
		}
	}

	s := samples(page)
	if v := value(t, s, `go_info{version="`+runtime.Version()+`"}`); v != 1 {
		t.Errorf("go_info = %v, want 1", v)
	}
	if v := value(t, s, "go_goroutines"); v < 1 {
		t.Errorf("go_goroutines = %v, want at least this test's", v)
	}
	if v := value(t, s, "go_sched_gomaxprocs_threads"); v != float64(runtime.GOMAXPROCS(0)) {
		t.Errorf("go_sched_gomaxprocs_threads = %v, want GOMAXPROCS %d", v, runtime.GOMAXPROCS(0))
	}
	if v := value(t, s, "go_gc_duration_seconds_count"); v < 1 {
		t.Errorf("go_gc_duration_seconds_count = %v after runtime.GC(), want at least 1", v)
	}
	for _, q := range []string{"0", "0.25", "0.5", "0.75", "1"} {
		value(t, s, `go_gc_duration_seconds{quantile="`+q+`"}`)
	}
	if v := value(t, s, "go_memstats_last_gc_time_seconds"); v < 1.7e9 {
		t.Errorf("go_memstats_last_gc_time_seconds = %v, want a recent Unix time", v)
	}
	// The sums client_golang computes from runtime/metrics.
	alloc, heapAlloc := value(t, s, "go_memstats_alloc_bytes"), value(t, s, "go_memstats_heap_alloc_bytes")
	inuse, idle, heapSys := value(t, s, "go_memstats_heap_inuse_bytes"), value(t, s, "go_memstats_heap_idle_bytes"), value(t, s, "go_memstats_heap_sys_bytes")
	if alloc <= 0 || alloc != heapAlloc || inuse < heapAlloc || heapSys != inuse+idle || value(t, s, "go_memstats_sys_bytes") < heapSys {
		t.Errorf("want 0 < alloc = heap_alloc <= heap_inuse, heap_sys = heap_inuse + heap_idle <= sys; got alloc %v, heap_alloc %v, "+
			"heap_inuse %v, heap_idle %v, heap_sys %v", alloc, heapAlloc, inuse, idle, heapSys)
	}
	if m, f := value(t, s, "go_memstats_mallocs_total"), value(t, s, "go_memstats_frees_total"); m <= f {
		t.Errorf("mallocs_total %v <= frees_total %v: live objects cannot be negative", m, f)
	}
}

func TestPage_Summary_QuantilesSumAndCount(t *testing.T) {
	p := page{}
	p.summary("s_seconds", "A summary.", []float64{0, 0.5, 1}, []float64{1e-05, 0.25, 3}, 4.5, 7, "x", "y")
	var b strings.Builder
	if err := p.writeTo(&b); err != nil {
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
