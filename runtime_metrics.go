package kctl

import (
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"time"
)

// This file writes the go_* series of the metrics page as the Prometheus Go
// client's default Go collector (client_golang v1.20 and later) names them,
// with its help texts and types, so that Go runtime dashboards work unchanged:
//
//	go_goroutines, go_threads, go_info{version}        gauges
//	go_gc_duration_seconds                            summary of stop-the-world GC pauses
//	go_memstats_*                                     the runtime.MemStats fields, from runtime/metrics
//	go_gc_gogc_percent, go_gc_gomemlimit_bytes, go_sched_gomaxprocs_threads   gauges
//
// Like the client's collector it reads runtime/metrics, which does not stop
// the world (runtime.ReadMemStats does), plus debug.ReadGCStats for the pauses.

// memstat is one go_memstats_* series: a sum of runtime/metrics values.
type memstat struct {
	name, help string
	counter    bool
	sum        []string // runtime/metrics names whose values add up to the series
}

// memstats are client_golang's go_memstats_* series, each computed as its
// memStatsFromRM computes the runtime.MemStats field from runtime/metrics.
var memstats = []memstat{
	{"go_memstats_alloc_bytes", "Number of bytes allocated in heap and currently in use. Equals to /memory/classes/heap/objects:bytes.",
		false, []string{"/memory/classes/heap/objects:bytes"}},
	{"go_memstats_alloc_bytes_total", "Total number of bytes allocated in heap until now, even if released already. Equals to /gc/heap/allocs:bytes.",
		true, []string{"/gc/heap/allocs:bytes"}},
	{"go_memstats_sys_bytes", "Number of bytes obtained from system. Equals to /memory/classes/total:byte.",
		false, []string{"/memory/classes/total:bytes"}},
	{"go_memstats_mallocs_total", "Total number of heap objects allocated, both live and gc-ed. Semantically a counter version for go_memstats_heap_objects gauge. Equals to /gc/heap/allocs:objects + /gc/heap/tiny/allocs:objects.",
		true, []string{"/gc/heap/allocs:objects", "/gc/heap/tiny/allocs:objects"}},
	{"go_memstats_frees_total", "Total number of heap objects frees. Equals to /gc/heap/frees:objects + /gc/heap/tiny/allocs:objects.",
		true, []string{"/gc/heap/frees:objects", "/gc/heap/tiny/allocs:objects"}},
	{"go_memstats_heap_alloc_bytes", "Number of heap bytes allocated and currently in use, same as go_memstats_alloc_bytes. Equals to /memory/classes/heap/objects:bytes.",
		false, []string{"/memory/classes/heap/objects:bytes"}},
	{"go_memstats_heap_sys_bytes", "Number of heap bytes obtained from system. Equals to /memory/classes/heap/objects:bytes + /memory/classes/heap/unused:bytes + /memory/classes/heap/released:bytes + /memory/classes/heap/free:bytes.",
		false, []string{"/memory/classes/heap/objects:bytes", "/memory/classes/heap/unused:bytes", "/memory/classes/heap/released:bytes", "/memory/classes/heap/free:bytes"}},
	{"go_memstats_heap_idle_bytes", "Number of heap bytes waiting to be used. Equals to /memory/classes/heap/released:bytes + /memory/classes/heap/free:bytes.",
		false, []string{"/memory/classes/heap/released:bytes", "/memory/classes/heap/free:bytes"}},
	{"go_memstats_heap_inuse_bytes", "Number of heap bytes that are in use. Equals to /memory/classes/heap/objects:bytes + /memory/classes/heap/unused:bytes",
		false, []string{"/memory/classes/heap/objects:bytes", "/memory/classes/heap/unused:bytes"}},
	{"go_memstats_heap_released_bytes", "Number of heap bytes released to OS. Equals to /memory/classes/heap/released:bytes.",
		false, []string{"/memory/classes/heap/released:bytes"}},
	{"go_memstats_heap_objects", "Number of currently allocated objects. Equals to /gc/heap/objects:objects.",
		false, []string{"/gc/heap/objects:objects"}},
	{"go_memstats_stack_inuse_bytes", "Number of bytes obtained from system for stack allocator in non-CGO environments. Equals to /memory/classes/heap/stacks:bytes.",
		false, []string{"/memory/classes/heap/stacks:bytes"}},
	{"go_memstats_stack_sys_bytes", "Number of bytes obtained from system for stack allocator. Equals to /memory/classes/heap/stacks:bytes + /memory/classes/os-stacks:bytes.",
		false, []string{"/memory/classes/heap/stacks:bytes", "/memory/classes/os-stacks:bytes"}},
	{"go_memstats_mspan_inuse_bytes", "Number of bytes in use by mspan structures. Equals to /memory/classes/metadata/mspan/inuse:bytes.",
		false, []string{"/memory/classes/metadata/mspan/inuse:bytes"}},
	{"go_memstats_mspan_sys_bytes", "Number of bytes used for mspan structures obtained from system. Equals to /memory/classes/metadata/mspan/inuse:bytes + /memory/classes/metadata/mspan/free:bytes.",
		false, []string{"/memory/classes/metadata/mspan/inuse:bytes", "/memory/classes/metadata/mspan/free:bytes"}},
	{"go_memstats_mcache_inuse_bytes", "Number of bytes in use by mcache structures. Equals to /memory/classes/metadata/mcache/inuse:bytes.",
		false, []string{"/memory/classes/metadata/mcache/inuse:bytes"}},
	{"go_memstats_mcache_sys_bytes", "Number of bytes used for mcache structures obtained from system. Equals to /memory/classes/metadata/mcache/inuse:bytes + /memory/classes/metadata/mcache/free:bytes.",
		false, []string{"/memory/classes/metadata/mcache/inuse:bytes", "/memory/classes/metadata/mcache/free:bytes"}},
	{"go_memstats_buck_hash_sys_bytes", "Number of bytes used by the profiling bucket hash table. Equals to /memory/classes/profiling/buckets:bytes.",
		false, []string{"/memory/classes/profiling/buckets:bytes"}},
	{"go_memstats_gc_sys_bytes", "Number of bytes used for garbage collection system metadata. Equals to /memory/classes/metadata/other:bytes.",
		false, []string{"/memory/classes/metadata/other:bytes"}},
	{"go_memstats_other_sys_bytes", "Number of bytes used for other system allocations. Equals to /memory/classes/other:bytes.",
		false, []string{"/memory/classes/other:bytes"}},
	{"go_memstats_next_gc_bytes", "Number of heap bytes when next garbage collection will take place. Equals to /gc/heap/goal:bytes.",
		false, []string{"/gc/heap/goal:bytes"}},
}

// runtimeGauges are the runtime/metrics values client_golang's collector
// exposes by default under their own names, its help being the runtime's
// description and "Sourced from <name>.".
var runtimeGauges = []struct{ source, name string }{
	{"/gc/gogc:percent", "go_gc_gogc_percent"},
	{"/gc/gomemlimit:bytes", "go_gc_gomemlimit_bytes"},
	{"/sched/gomaxprocs:threads", "go_sched_gomaxprocs_threads"},
}

// collectGoRuntime adds the go_* series to p.
func collectGoRuntime(p page) {
	p.gauge("go_goroutines", "Number of goroutines that currently exist.", float64(runtime.NumGoroutine()))
	threads, _ := runtime.ThreadCreateProfile(nil)
	p.gauge("go_threads", "Number of OS threads created.", float64(threads))
	p.gauge("go_info", "Information about the Go environment.", 1, "version", runtime.Version())

	stats := debug.GCStats{PauseQuantiles: make([]time.Duration, 5)} // min, 25%, 50%, 75%, max
	debug.ReadGCStats(&stats)
	var quantiles []float64
	for _, d := range stats.PauseQuantiles {
		quantiles = append(quantiles, d.Seconds())
	}
	p.summary("go_gc_duration_seconds", "A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles.",
		[]float64{0, 0.25, 0.5, 0.75, 1}, quantiles, stats.PauseTotal.Seconds(), uint64(stats.NumGC))
	lastGC := 0.0
	if !stats.LastGC.IsZero() {
		lastGC = float64(stats.LastGC.UnixNano()) / 1e9
	}
	p.gauge("go_memstats_last_gc_time_seconds", "Number of seconds since 1970 of last garbage collection.", lastGC)

	values := readRuntimeMetrics()
	for _, m := range memstats {
		v := 0.0
		for _, name := range m.sum {
			v += values[name]
		}
		if m.counter {
			p.counter(m.name, m.help, v)
		} else {
			p.gauge(m.name, m.help, v)
		}
	}
	for _, d := range rtmetrics.All() {
		for _, g := range runtimeGauges {
			if g.source == d.Name {
				p.gauge(g.name, d.Description+" Sourced from "+d.Name+".", values[d.Name])
			}
		}
	}
}

// readRuntimeMetrics reads the runtime/metrics values that collectGoRuntime
// uses. A name this Go version does not know reads as 0.
func readRuntimeMetrics() map[string]float64 {
	values := map[string]float64{} // first the names, each once
	for _, m := range memstats {
		for _, name := range m.sum {
			values[name] = 0
		}
	}
	for _, g := range runtimeGauges {
		values[g.source] = 0
	}
	var samples []rtmetrics.Sample
	for name := range values {
		samples = append(samples, rtmetrics.Sample{Name: name})
	}
	rtmetrics.Read(samples)
	for _, s := range samples {
		switch s.Value.Kind() {
		case rtmetrics.KindUint64:
			values[s.Name] = float64(s.Value.Uint64())
		case rtmetrics.KindFloat64:
			values[s.Name] = s.Value.Float64()
		}
	}
	return values
}
