package prom

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// CollectGoRuntime adds the go_* series as the Prometheus Go client's
// default Go collector (client_golang v1.20 and later) names them, with its
// help texts and types, so that Go runtime dashboards work unchanged:
//
//	go_goroutines, go_threads, go_info{version}  gauges
//	go_gc_duration_seconds                      summary of stop-the-world GC pauses
//	go_memstats_*                               the runtime.MemStats fields
//	go_gc_gogc_percent                          gauge
//	go_gc_gomemlimit_bytes                      gauge
//	go_sched_gomaxprocs_threads                 gauge
//
// Like the client's collector it reads runtime/metrics, which does not stop
// the world (runtime.ReadMemStats does), and debug.ReadGCStats for the
// pauses.
func CollectGoRuntime(p *Page) {
	goroutines := runtime.NumGoroutine()
	p.Gauge("go_goroutines",
		"Number of goroutines that currently exist.",
		float64(goroutines))
	threads, _ := runtime.ThreadCreateProfile(nil)
	p.Gauge("go_threads",
		"Number of OS threads created.",
		float64(threads))
	p.Gauge("go_info",
		"Information about the Go environment.",
		1, "version", runtime.Version())
	collectGC(p)
	values := readRuntimeMetrics()
	for _, m := range memstats {
		m.collect(p, values)
	}
	for _, d := range metrics.All() {
		for _, g := range runtimeGauges {
			if g.source != d.Name {
				continue
			}
			help := d.Description +
				" Sourced from " + d.Name + "."
			p.Gauge(g.name, help, values[d.Name])
		}
	}
}

// collectGC adds the summary of GC pauses and the time of the last GC.
func collectGC(p *Page) {
	// The quantiles are the minimum, 25%, 50%, 75% and the maximum.
	stats := debug.GCStats{
		PauseQuantiles: make([]time.Duration, 5),
	}
	debug.ReadGCStats(&stats)
	s := summary{
		quantiles: []float64{0, 0.25, 0.5, 0.75, 1},
		sum:       stats.PauseTotal.Seconds(),
		count:     uint64(stats.NumGC),
	}
	for _, d := range stats.PauseQuantiles {
		s.values = append(s.values, d.Seconds())
	}
	p.summary("go_gc_duration_seconds",
		"A summary of the wall-time pause (stop-the-world) "+
			"duration in garbage collection cycles.",
		s)
	lastGC := 0.0
	if !stats.LastGC.IsZero() {
		lastGC = float64(stats.LastGC.UnixNano()) / 1e9
	}
	p.Gauge("go_memstats_last_gc_time_seconds",
		"Number of seconds since 1970 of last garbage collection.",
		lastGC)
}

// memstat is one go_memstats_* series: a sum of runtime/metrics values.
type memstat struct {
	name    string
	help    string
	counter bool
	// sum are the runtime/metrics names whose values add up to the series.
	sum []string
}

// collect adds m's series, its sum of values (by runtime/metrics name).
func (m memstat) collect(p *Page, values map[string]float64) {
	v := 0.0
	for _, name := range m.sum {
		v += values[name]
	}
	if m.counter {
		p.Counter(m.name, m.help, v)
		return
	}
	p.Gauge(m.name, m.help, v)
}

// memstats are client_golang's go_memstats_* series, each computed as its
// memStatsFromRM computes the runtime.MemStats field from runtime/metrics.
var memstats = []memstat{
	{
		name: "go_memstats_alloc_bytes",
		help: "Number of bytes allocated in heap and " +
			"currently in use. Equals to " +
			"/memory/classes/heap/objects:bytes.",
		sum: []string{
			"/memory/classes/heap/objects:bytes",
		},
	},
	{
		name: "go_memstats_alloc_bytes_total",
		help: "Total number of bytes allocated in heap " +
			"until now, even if released already. Equals " +
			"to /gc/heap/allocs:bytes.",
		counter: true,
		sum: []string{
			"/gc/heap/allocs:bytes",
		},
	},
	{
		name: "go_memstats_sys_bytes",
		help: "Number of bytes obtained from system. Equals " +
			"to /memory/classes/total:byte.",
		sum: []string{
			"/memory/classes/total:bytes",
		},
	},
	{
		name: "go_memstats_mallocs_total",
		help: "Total number of heap objects allocated, both " +
			"live and gc-ed. Semantically a counter " +
			"version for go_memstats_heap_objects gauge. " +
			"Equals to /gc/heap/allocs:objects + " +
			"/gc/heap/tiny/allocs:objects.",
		counter: true,
		sum: []string{
			"/gc/heap/allocs:objects",
			"/gc/heap/tiny/allocs:objects",
		},
	},
	{
		name: "go_memstats_frees_total",
		help: "Total number of heap objects frees. Equals " +
			"to /gc/heap/frees:objects + " +
			"/gc/heap/tiny/allocs:objects.",
		counter: true,
		sum: []string{
			"/gc/heap/frees:objects",
			"/gc/heap/tiny/allocs:objects",
		},
	},
	{
		name: "go_memstats_heap_alloc_bytes",
		help: "Number of heap bytes allocated and currently " +
			"in use, same as go_memstats_alloc_bytes. " +
			"Equals to " +
			"/memory/classes/heap/objects:bytes.",
		sum: []string{
			"/memory/classes/heap/objects:bytes",
		},
	},
	{
		name: "go_memstats_heap_sys_bytes",
		help: "Number of heap bytes obtained from system. " +
			"Equals to /memory/classes/heap/objects:bytes " +
			"+ /memory/classes/heap/unused:bytes + " +
			"/memory/classes/heap/released:bytes + " +
			"/memory/classes/heap/free:bytes.",
		sum: []string{
			"/memory/classes/heap/objects:bytes",
			"/memory/classes/heap/unused:bytes",
			"/memory/classes/heap/released:bytes",
			"/memory/classes/heap/free:bytes",
		},
	},
	{
		name: "go_memstats_heap_idle_bytes",
		help: "Number of heap bytes waiting to be used. " +
			"Equals to " +
			"/memory/classes/heap/released:bytes + " +
			"/memory/classes/heap/free:bytes.",
		sum: []string{
			"/memory/classes/heap/released:bytes",
			"/memory/classes/heap/free:bytes",
		},
	},
	{
		name: "go_memstats_heap_inuse_bytes",
		help: "Number of heap bytes that are in use. Equals " +
			"to /memory/classes/heap/objects:bytes + " +
			"/memory/classes/heap/unused:bytes",
		sum: []string{
			"/memory/classes/heap/objects:bytes",
			"/memory/classes/heap/unused:bytes",
		},
	},
	{
		name: "go_memstats_heap_released_bytes",
		help: "Number of heap bytes released to OS. Equals " +
			"to /memory/classes/heap/released:bytes.",
		sum: []string{
			"/memory/classes/heap/released:bytes",
		},
	},
	{
		name: "go_memstats_heap_objects",
		help: "Number of currently allocated objects. " +
			"Equals to /gc/heap/objects:objects.",
		sum: []string{
			"/gc/heap/objects:objects",
		},
	},
	{
		name: "go_memstats_stack_inuse_bytes",
		help: "Number of bytes obtained from system for " +
			"stack allocator in non-CGO environments. " +
			"Equals to /memory/classes/heap/stacks:bytes.",
		sum: []string{
			"/memory/classes/heap/stacks:bytes",
		},
	},
	{
		name: "go_memstats_stack_sys_bytes",
		help: "Number of bytes obtained from system for " +
			"stack allocator. Equals to " +
			"/memory/classes/heap/stacks:bytes + " +
			"/memory/classes/os-stacks:bytes.",
		sum: []string{
			"/memory/classes/heap/stacks:bytes",
			"/memory/classes/os-stacks:bytes",
		},
	},
	{
		name: "go_memstats_mspan_inuse_bytes",
		help: "Number of bytes in use by mspan structures. " +
			"Equals to " +
			"/memory/classes/metadata/mspan/inuse:bytes.",
		sum: []string{
			"/memory/classes/metadata/mspan/inuse:bytes",
		},
	},
	{
		name: "go_memstats_mspan_sys_bytes",
		help: "Number of bytes used for mspan structures " +
			"obtained from system. Equals to " +
			"/memory/classes/metadata/mspan/inuse:bytes + " +
			"/memory/classes/metadata/mspan/free:bytes.",
		sum: []string{
			"/memory/classes/metadata/mspan/inuse:bytes",
			"/memory/classes/metadata/mspan/free:bytes",
		},
	},
	{
		name: "go_memstats_mcache_inuse_bytes",
		help: "Number of bytes in use by mcache structures. " +
			"Equals to " +
			"/memory/classes/metadata/mcache/inuse:bytes.",
		sum: []string{
			"/memory/classes/metadata/mcache/inuse:bytes",
		},
	},
	{
		name: "go_memstats_mcache_sys_bytes",
		help: "Number of bytes used for mcache structures " +
			"obtained from system. Equals to " +
			"/memory/classes/metadata/mcache/inuse:bytes " +
			"+ " +
			"/memory/classes/metadata/mcache/free:bytes.",
		sum: []string{
			"/memory/classes/metadata/mcache/inuse:bytes",
			"/memory/classes/metadata/mcache/free:bytes",
		},
	},
	{
		name: "go_memstats_buck_hash_sys_bytes",
		help: "Number of bytes used by the profiling bucket " +
			"hash table. Equals to " +
			"/memory/classes/profiling/buckets:bytes.",
		sum: []string{
			"/memory/classes/profiling/buckets:bytes",
		},
	},
	{
		name: "go_memstats_gc_sys_bytes",
		help: "Number of bytes used for garbage collection " +
			"system metadata. Equals to " +
			"/memory/classes/metadata/other:bytes.",
		sum: []string{
			"/memory/classes/metadata/other:bytes",
		},
	},
	{
		name: "go_memstats_other_sys_bytes",
		help: "Number of bytes used for other system " +
			"allocations. Equals to " +
			"/memory/classes/other:bytes.",
		sum: []string{
			"/memory/classes/other:bytes",
		},
	},
	{
		name: "go_memstats_next_gc_bytes",
		help: "Number of heap bytes when next garbage " +
			"collection will take place. Equals to " +
			"/gc/heap/goal:bytes.",
		sum: []string{
			"/gc/heap/goal:bytes",
		},
	},
}

// runtimeGauges are the runtime/metrics values that client_golang's
// collector shows by default under their own names, its help being the
// runtime's description and "Sourced from <name>.".
var runtimeGauges = []struct{ source, name string }{
	{"/gc/gogc:percent", "go_gc_gogc_percent"},
	{"/gc/gomemlimit:bytes", "go_gc_gomemlimit_bytes"},
	{"/sched/gomaxprocs:threads", "go_sched_gomaxprocs_threads"},
}

// readRuntimeMetrics reads the runtime/metrics values that
// CollectGoRuntime uses, by name. A name this Go version does not know
// reads as 0.
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
	var samples []metrics.Sample
	for name := range values {
		s := metrics.Sample{Name: name}
		samples = append(samples, s)
	}
	metrics.Read(samples)
	for _, s := range samples {
		switch s.Value.Kind() {
		case metrics.KindUint64:
			values[s.Name] = float64(s.Value.Uint64())
		case metrics.KindFloat64:
			values[s.Name] = s.Value.Float64()
		}
	}
	return values
}
