package metrics

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kctl-dev/kctl/internal/prom"
)

func TestWorkqueueBuckets_MatchControllerRuntimeLeLabels(t *testing.T) {
	want := []string{"1e-08", "1e-07", "1e-06", "9.999999999999999e-06", "9.999999999999999e-05",
		"0.001", "0.01", "0.1", "1", "10", "100", "1000", "+Inf"}
	p := &prom.Page{}
	p.Histogram("w", "W.", prom.NewHistogram(workqueueBuckets))
	var b strings.Builder
	if _, err := p.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	var got []string
	for line := range strings.Lines(b.String()) {
		if _, le, ok := strings.Cut(line, `w_bucket{le="`); ok {
			got = append(got, le[:strings.Index(le, `"`)])
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("workqueue le labels = %v, want %v", got, want)
	}
	if len(reconcileBuckets) != 40 || reconcileBuckets[0] != 0.005 || reconcileBuckets[39] != 60 {
		t.Errorf("reconcileBuckets = %v, want controller-runtime's 40 buckets 0.005..60", reconcileBuckets)
	}
}
