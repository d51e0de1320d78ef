package prom

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestPage_PassesPromtoolCheckMetrics runs Debian's promtool on a page
// with every kind of series, odd label values and both collectors. It
// skips loudly without promtool, and fails when CI=true.
func TestPage_PassesPromtoolCheckMetrics(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		ci, _ := strconv.ParseBool(os.Getenv("CI"))
		if ci {
			t.Fatal("promtool not found: install Debian's prometheus package")
		}
		fmt.Fprintf(os.Stderr, "\n*** SKIPPING %s: promtool not found ***\n\n", t.Name())
		t.Skip("SKIPPING: promtool not found: apt-get install prometheus")
	}
	odd := `we"ird\name` + "\n"
	page := collected(t, func(p *Page) {
		h := NewHistogram([]float64{0.1, 1})
		h.Observe(0.5)
		p.Histogram("app_wait_seconds", "Wait.\nTwo lines.", h, "queue", odd)
		p.Counter("app_jobs_total", "Jobs.", 3, "result", odd)
		f := &Family{Name: "app_level", Help: "Level.", Labels: []string{"x"}}
		f.With([]string{odd + "\xff"}).Set(0.5) // shown as U+FFFD
		f.collect(p)
		CollectGoRuntime(p)
		CollectProcess(p)
	})
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(page)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s\npage:\n%s", err, out, page)
	}
}
