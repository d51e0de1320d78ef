package prom

import (
	"runtime"
	"testing"
)

// goCollectorFamilies are the families of client_golang's default Go
// collector (v1.20 and later) with their types.
var goCollectorFamilies = map[string]string{
	"go_goroutines":                    "gauge",
	"go_threads":                       "gauge",
	"go_info":                          "gauge",
	"go_gc_duration_seconds":           "summary",
	"go_memstats_last_gc_time_seconds": "gauge",
	"go_memstats_alloc_bytes":          "gauge",
	"go_memstats_alloc_bytes_total":    "counter",
	"go_memstats_sys_bytes":            "gauge",
	"go_memstats_mallocs_total":        "counter",
	"go_memstats_frees_total":          "counter",
	"go_memstats_heap_alloc_bytes":     "gauge",
	"go_memstats_heap_sys_bytes":       "gauge",
	"go_memstats_heap_idle_bytes":      "gauge",
	"go_memstats_heap_inuse_bytes":     "gauge",
	"go_memstats_heap_released_bytes":  "gauge",
	"go_memstats_heap_objects":         "gauge",
	"go_memstats_stack_inuse_bytes":    "gauge",
	"go_memstats_stack_sys_bytes":      "gauge",
	"go_memstats_mspan_inuse_bytes":    "gauge",
	"go_memstats_mspan_sys_bytes":      "gauge",
	"go_memstats_mcache_inuse_bytes":   "gauge",
	"go_memstats_mcache_sys_bytes":     "gauge",
	"go_memstats_buck_hash_sys_bytes":  "gauge",
	"go_memstats_gc_sys_bytes":         "gauge",
	"go_memstats_other_sys_bytes":      "gauge",
	"go_memstats_next_gc_bytes":        "gauge",
	"go_gc_gogc_percent":               "gauge",
	"go_gc_gomemlimit_bytes":           "gauge",
	"go_sched_gomaxprocs_threads":      "gauge",
}

func TestCollectGoRuntime_FamiliesAsThePrometheusGoCollectorNamesThem(t *testing.T) {
	runtime.GC() // at least one pause to summarize
	page := collected(t, CollectGoRuntime)
	typ, help := familyDocs(page)
	if len(typ) != len(goCollectorFamilies) {
		t.Errorf("%d families, want %d: %v", len(typ), len(goCollectorFamilies), typ)
	}
	for name, want := range goCollectorFamilies {
		if typ[name] != want {
			t.Errorf("# TYPE %s = %q, want %q", name, typ[name], want)
		}
	}
	for name, want := range map[string]string{
		"go_goroutines": "Number of goroutines that currently exist.",
		"go_gc_duration_seconds": "A summary of the wall-time pause " +
			"(stop-the-world) duration in garbage collection cycles.",
		"go_memstats_alloc_bytes": "Number of bytes allocated in heap " +
			"and currently in use. " +
			"Equals to /memory/classes/heap/objects:bytes.",
		"go_gc_gogc_percent": "Heap size target percentage configured " +
			"by the user, otherwise 100. This value is set by the GOGC " +
			"environment variable, and the runtime/debug.SetGCPercent " +
			"function. Sourced from /gc/gogc:percent.",
	} {
		if help[name] != want {
			t.Errorf("# HELP %s = %q, want %q", name, help[name], want)
		}
	}

	s := samples(page)
	info := `go_info{version="` + runtime.Version() + `"}`
	if v := value(t, s, info); v != 1 {
		t.Errorf("go_info = %v, want 1", v)
	}
	if v := value(t, s, "go_goroutines"); v < 1 {
		t.Errorf("go_goroutines = %v, want at least this test's", v)
	}
	procs := float64(runtime.GOMAXPROCS(0))
	if v := value(t, s, "go_sched_gomaxprocs_threads"); v != procs {
		t.Errorf("go_sched_gomaxprocs_threads = %v, want GOMAXPROCS %v", v, procs)
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
	checkMemstatSums(t, s)
}

// checkMemstatSums checks the sums client_golang computes from
// runtime/metrics: 0 < alloc = heap_alloc <= heap_inuse, heap_sys =
// heap_inuse + heap_idle <= sys, and mallocs > frees.
func checkMemstatSums(t *testing.T, s map[string]string) {
	t.Helper()
	alloc := value(t, s, "go_memstats_alloc_bytes")
	heapAlloc := value(t, s, "go_memstats_heap_alloc_bytes")
	inuse := value(t, s, "go_memstats_heap_inuse_bytes")
	idle := value(t, s, "go_memstats_heap_idle_bytes")
	heapSys := value(t, s, "go_memstats_heap_sys_bytes")
	sys := value(t, s, "go_memstats_sys_bytes")
	if alloc <= 0 || alloc != heapAlloc || inuse < heapAlloc ||
		heapSys != inuse+idle || sys < heapSys {
		t.Errorf("want 0 < alloc = heap_alloc <= heap_inuse, "+
			"heap_sys = heap_inuse + heap_idle <= sys; got alloc %v, "+
			"heap_alloc %v, heap_inuse %v, heap_idle %v, heap_sys %v, sys %v",
			alloc, heapAlloc, inuse, idle, heapSys, sys)
	}
	m := value(t, s, "go_memstats_mallocs_total")
	f := value(t, s, "go_memstats_frees_total")
	if m <= f {
		t.Errorf("mallocs_total %v <= frees_total %v: "+
			"live objects cannot be negative", m, f)
	}
}
