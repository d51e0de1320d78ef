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

// A shard group's series show from its first Shard call, with the
// values set.
func TestRegistry_Shard_ShowsMembersRangesAndHandovers(t *testing.T) {
	m := New()
	s := m.Shard("podcount")
	s.Members.Store(3)
	s.Owned.Store(21)
	s.Handovers.Add(2)
	if m.Shard("podcount") != s {
		t.Fatal("a second Shard call made new series")
	}
	var b strings.Builder
	if _, err := m.Page().WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`kctl_shard_members{group="podcount"} 3`,
		`kctl_shard_ranges_owned{group="podcount"} 21`,
		`kctl_shard_handovers_total{group="podcount"} 2`,
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("page lacks %s", want)
		}
	}
}
