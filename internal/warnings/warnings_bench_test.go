package warnings

import (
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"testing"
)

// BenchmarkHeader_Repeated is the cost of an answer whose warning was
// logged already: what a client of a deprecated API pays per request.
func BenchmarkHeader_Repeated(b *testing.B) {
	l := New(slog.New(slog.DiscardHandler))
	h := http.Header{"Warning": {`299 - "v1beta1 is deprecated"`}}
	b.ReportAllocs()
	for b.Loop() {
		l.Header(h, "GET /a")
	}
}

// BenchmarkHeader_None is the cost of an answer without warnings.
func BenchmarkHeader_None(b *testing.B) {
	l := New(slog.New(slog.DiscardHandler))
	h := http.Header{"Content-Type": {"application/json"}}
	b.ReportAllocs()
	for b.Loop() {
		l.Header(h, "GET /a")
	}
}

// BenchmarkLog_FullMemory reports the heap a Log holds once it has seen
// 100 times Max distinct texts (heap-bytes/log), the bound README states.
func BenchmarkLog_FullMemory(b *testing.B) {
	var texts []http.Header
	for i := range 100 * Max {
		texts = append(texts, http.Header{"Warning": {fmt.Sprintf(`299 - "text %d"`, i)}})
	}
	var grew int64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		l := New(slog.New(slog.DiscardHandler))
		for _, h := range texts {
			l.Header(h, "GET /a")
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		grew = int64(after.HeapAlloc) - int64(before.HeapAlloc)
		runtime.KeepAlive(l)
	}
	b.ReportMetric(float64(grew), "heap-bytes/log")
}
