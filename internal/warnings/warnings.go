// Package warnings logs the API server's warnings (the Warning response
// header: a deprecated API, an unknown field dropped from a write) once
// per distinct text, as client-go's deduplicating warning writer does:
//
//	w := warnings.New(logger)
//	resp, err := hc.Do(req)
//	w.Header(resp.Header, "PUT /apis/example.com/v1beta1/...")
package warnings

import (
	"hash/maphash"
	"log/slog"
	"net/http"
	"sync"

	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// Max is how many distinct texts a Log remembers. Past it, the oldest
// is forgotten first: if that warning comes again, it is logged again.
// A text is remembered by its 64-bit hash, so memory is bounded by Max
// whatever the texts' length: 46 KB once full, as BenchmarkLog_FullMemory
// measures after 100 times Max distinct texts.
const Max = 1024

// Log logs each warning text once, as long as it remembers it. It is safe
// for concurrent use. Make one with New.
//
// Invariants: seen holds exactly the hashes in ring[:n]; n <= Max;
// next is where the next hash goes, overwriting the oldest once n == Max.
type Log struct {
	log  *slog.Logger
	seed maphash.Seed

	mu   sync.Mutex
	seen map[uint64]struct{}
	ring []uint64
	n    int
	next int
}

// New makes a Log that writes to log.
func New(log *slog.Logger) *Log {
	return &Log{
		log:  log,
		seed: maphash.MakeSeed(),
		seen: make(map[uint64]struct{}),
		ring: make([]uint64, Max),
	}
}

// Header logs the warnings in h (code 299, as the API server sends
// them) not logged yet, at level WARN, with call (the request that
// got them, e.g. "GET /apis/...") as the attribute "request". A
// malformed header is skipped, as client-go skips it.
func (l *Log) Header(h http.Header, call string) {
	values := h["Warning"]
	if len(values) == 0 {
		return
	}
	parsed, _ := utilnet.ParseWarningHeaders(values)
	for _, w := range parsed {
		if w.Code != 299 || w.Text == "" {
			continue
		}
		if l.first(w.Text) {
			l.log.Warn("the API server warns",
				"warning", w.Text,
				"request", call)
		}
	}
}

// first remembers text and reports whether it was new.
func (l *Log) first(text string) bool {
	sum := maphash.String(l.seed, text)
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.seen[sum]; ok {
		return false
	}
	if l.n == Max {
		delete(l.seen, l.ring[l.next])
	} else {
		l.n++
	}
	l.ring[l.next] = sum
	l.next = (l.next + 1) % Max
	l.seen[sum] = struct{}{}
	return true
}
