package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// summary is the median and range of repeated measurements.
type summary struct {
	n                int
	median, min, max float64
}

func summarize(xs []float64) summary {
	if len(xs) == 0 {
		return summary{median: math.NaN(), min: math.NaN(), max: math.NaN()}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return summary{n: len(s), median: m, min: s[0], max: s[len(s)-1]}
}

// percentile returns the p-th percentile (0..100) of xs, nearest rank.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// format prints a summary as "median (min–max)" with the given precision.
func (s summary) format(prec int) string {
	if s.n == 0 {
		return "n/a"
	}
	if s.n == 1 {
		return fmt.Sprintf("%.*f (1 run)", prec, s.median)
	}
	return fmt.Sprintf("%.*f (%.*f–%.*f)", prec, s.median, prec, s.min, prec, s.max)
}

func ratio(a, b float64) string {
	if b == 0 || math.IsNaN(a) || math.IsNaN(b) {
		return "n/a"
	}
	if r := a / b; r < 0.1 {
		return fmt.Sprintf("%.3fx", r)
	}
	return fmt.Sprintf("%.2fx", a/b)
}

// versus compares a revision's runs with its base's: the ratio of the
// medians, then the base's min and max over its median. The new revision is
// no worse than the runs' spread if the first is at most the last.
func versus(a, base summary) string {
	if base.n < 2 {
		return ratio(a.median, base.median)
	}
	return fmt.Sprintf("%s (base %s–%s)", ratio(a.median, base.median), ratio(base.min, base.median), ratio(base.max, base.median))
}

// table is a markdown table.
type table struct {
	head []string
	rows [][]string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) String() string {
	var b strings.Builder
	line := func(cells []string) { b.WriteString("| " + strings.Join(cells, " | ") + " |\n") }
	line(t.head)
	sep := make([]string, len(t.head))
	for i := range sep {
		sep[i] = "---"
	}
	line(sep)
	for _, r := range t.rows {
		line(r)
	}
	return b.String()
}

// target is one goal of the benchmark issue and whether kctl met it.
type target struct {
	what, want, got string
	met             bool
	known           bool // false when a number is missing
}

func targetsTable(ts []target) string {
	t := &table{head: []string{"target", "wanted", "measured", "met"}}
	for _, x := range ts {
		met := "no"
		switch {
		case !x.known:
			met = "not measured"
		case x.met:
			met = "yes"
		}
		t.add(x.what, x.want, x.got, met)
	}
	return t.String()
}

// rotate returns xs (stacks, replica counts) starting at run mod len, so
// each goes first in turn.
func rotate[E any](xs []E, run int) []E {
	if len(xs) == 0 {
		return nil
	}
	k := run % len(xs)
	return append(slices.Clone(xs[k:]), xs[:k]...)
}
