package discovery

import (
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDiscovery_Due_AsksAgainOnlyAfterAMissAndAtMostOncePerSecond(t *testing.T) {
	t0 := time.Unix(1000, 0)
	doc := map[string]metav1.APIResource{"widgets": {Name: "widgets", Kind: "Widget"}}
	for _, tc := range []struct {
		what  string
		s     served
		after time.Duration
		name  string
		want  bool
	}{
		{"never asked", served{}, 0, "widgets", true},
		{"has it", served{fetched: t0, resources: doc}, time.Hour, "widgets", false},
		{"lacks it, asked just before", served{fetched: t0, resources: doc}, 999 * time.Millisecond, "gadgets", false},
		{"lacks it, asked a second before", served{fetched: t0, resources: doc}, time.Second, "gadgets", true},
		{"lacks the subresource, asked a second before", served{fetched: t0, resources: doc}, time.Second, "widgets/status", true},
		{"group version not served, asked just before", served{fetched: t0}, 999 * time.Millisecond, "widgets", false},
		{"group version not served, asked a second before", served{fetched: t0}, time.Second, "widgets", true},
		{"stale, asked just before", served{fetched: t0, resources: doc, stale: true}, 999 * time.Millisecond, "widgets", false},
		{"stale, asked a second before", served{fetched: t0, resources: doc, stale: true}, time.Second, "widgets", true},
		{"failed, asked just before", served{fetched: t0, err: errors.New("boom")}, 999 * time.Millisecond, "widgets", false},
		{"failed, asked a second before", served{fetched: t0, err: errors.New("boom")}, time.Second, "widgets", true},
	} {
		if got := tc.s.due(t0.Add(tc.after), tc.name); got != tc.want {
			t.Errorf("%s: due(+%v, %q) = %v, want %v", tc.what, tc.after, tc.name, got, tc.want)
		}
	}
}
