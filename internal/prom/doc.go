// Package prom writes the Prometheus text exposition format 0.0.4 by hand,
// with the standard library only. It knows Prometheus, not kctl: which
// series kctl shows, under which names and buckets, is the kctl package's.
//
// # The page
//
// A Page is one scrape: series added in any order, grouped by family
// name. WriteTo writes the families sorted by name, each with its HELP and
// TYPE lines, and each family's series sorted, so the same series always
// give the same text. Handler serves a fresh Page at every request.
//
// # Series
//
// A Histogram counts observations into fixed buckets without a lock. A
// Family is one metric with label names, holding a Series per set of label
// values; a Registry holds Families whose sample names do not overlap and
// adds all their series to a Page.
//
// # Collectors
//
// CollectGoRuntime adds the go_* series and CollectProcess the process_*
// series, named, typed and described as the Prometheus Go client's default
// collectors do, so that dashboards made for it work unchanged.
//
// # Concurrency
//
// Histogram, Series, Family and Registry are safe for concurrent use. A
// Page is not: one goroutine builds it, then writes it.
package prom
