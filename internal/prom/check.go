package prom

// The checks of a program's own metric at registration (kctl's Metrics):
// Prometheus names, help text, labels, buckets, kctl's own prefixes; and
// the logger of its first mistake.

import (
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"unicode/utf8"
)

// LogFirst returns a Family's Mistake: it logs the first mistake with the
// metric named name to log, and drops the others.
func LogFirst(log *slog.Logger, name string) func(what string) {
	var logged atomic.Bool
	return func(what string) {
		first := logged.CompareAndSwap(false, true)
		if !first {
			return
		}
		msg := "kctl: metric " + name + ": " + what +
			" (only the first mistake with this metric is logged)"
		log.Error(msg, "metric", name)
	}
}

// reservedPrefixes are those of the series kctl writes itself; a
// program's metric (kctl's Metrics) takes none of them unless reserved.
var reservedPrefixes = []string{
	"go_",
	"process_",
	"rest_client_",
	"workqueue_",
	"controller_runtime_",
	"leader_election_",
	"kctl_",
}

// isName reports whether s is a Prometheus metric or label name,
// [a-zA-Z_][a-zA-Z0-9_]* (the metric names of recording rules may also
// hold colons; a program's may not).
func isName(s string) bool {
	for i, c := range s {
		lower := 'a' <= c && c <= 'z'
		upper := 'A' <= c && c <= 'Z'
		letter := lower || upper || c == '_'
		digit := '0' <= c && c <= '9'
		if !letter && (i == 0 || !digit) {
			return false
		}
	}
	return s != ""
}

// Check returns what is wrong with f's name (its prefix too, unless
// reserved), help, labels and buckets, as an error for the caller of
// registration.
func Check(f *Family, reserved bool) error {
	p := problem(f, reserved)
	if p == "" {
		return nil
	}
	return fmt.Errorf("kctl: metric %q: %s", f.Name, p)
}

// problem returns the first thing wrong with f, or "".
func problem(f *Family, reserved bool) string {
	switch {
	case !isName(f.Name):
		return "the name is not a Prometheus metric name, " +
			"[a-zA-Z_][a-zA-Z0-9_]*"
	case strings.TrimSpace(f.Help) == "":
		return "the help text is empty: say what it measures"
	case !utf8.ValidString(f.Help):
		return "the help text is not UTF-8"
	case f.Type == "counter" && !strings.HasSuffix(f.Name, "_total"):
		return "a counter's name ends in _total " +
			"(Prometheus' convention, which promtool checks)"
	}
	for _, prefix := range reservedPrefixes {
		if !reserved && strings.HasPrefix(f.Name, prefix) {
			return "names beginning with " + prefix +
				" are kctl's own; begin it with your program's name"
		}
	}
	for i, l := range f.Labels {
		p := labelProblem(f, i, l)
		if p != "" {
			return p
		}
	}
	for i, b := range f.Buckets {
		bad := math.IsNaN(b) || math.IsInf(b, 0)
		if bad || i > 0 && b <= f.Buckets[i-1] {
			return fmt.Sprintf("buckets %v are not finite "+
				"and strictly ascending", f.Buckets)
		}
	}
	return ""
}

// labelProblem returns what is wrong with l, f's label name i, or "".
func labelProblem(f *Family, i int, l string) string {
	switch {
	case !isName(l) || strings.HasPrefix(l, "__"):
		return fmt.Sprintf("label name %q is not a Prometheus "+
			"label name, [a-zA-Z_][a-zA-Z0-9_]* "+
			"not beginning with __", l)
	case slices.Contains(f.Labels[:i], l):
		return fmt.Sprintf("label name %q is given twice", l)
	case l == "le" && f.Type == "histogram":
		return `a histogram has a label "le" of its own: ` +
			"name yours otherwise"
	}
	return ""
}
