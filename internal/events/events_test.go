package events

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestTokenBucket_Take(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := &tokenBucket{tokens: Burst, last: t0}
	for i, step := range []struct {
		at   time.Duration // since t0
		n    int           // takes
		want int           // successful takes
	}{
		{0, 30, 25},
		{Refill - time.Second, 1, 0},
		{Refill, 2, 1},
		{3 * Refill, 5, 2},
		{1000 * Refill, 30, 25}, // refills to the burst, no more
	} {
		got := 0
		for range step.n {
			if b.take(t0.Add(step.at)) {
				got++
			}
		}
		if got != step.want {
			t.Errorf("step %d: %d x take(t0+%v) succeeded %d times, want %d", i, step.n, step.at, got, step.want)
		}
	}
}

// V1 cuts what events.k8s.io/v1 would refuse as too long, on a rune
// boundary (the server checks that it has none of the deprecated core/v1
// fields: recorder_test.go).
func TestV1_CutsToTheAPIsLimits(t *testing.T) {
	long := strings.Repeat("é", 600) // 1,200 bytes
	e := &corev1.Event{Reason: strings.Repeat("R", 200), Action: "Scale", Message: long, Count: 3,
		Source: corev1.EventSource{Component: "c"}, ReportingController: "c", ReportingInstance: "h",
		FirstTimestamp: metav1.Now()}
	v := V1(e)
	if len(v.Note) > NoteLimit || !utf8.ValidString(v.Note) || !strings.HasPrefix(long, v.Note) || len(v.Note) < NoteLimit-1 {
		t.Errorf("note of %d bytes, valid UTF-8 %t; want the message cut to at most %d bytes on a rune boundary", len(v.Note), utf8.ValidString(v.Note), NoteLimit)
	}
	if len(v.Reason) != ReasonLimit || v.Action != "Scale" || v.EventTime.IsZero() {
		t.Errorf("reason of %d bytes, action %q, eventTime %v; want %d, Scale, set", len(v.Reason), v.Action, v.EventTime, ReasonLimit)
	}
	if v.Series != nil {
		t.Errorf("series set on a new Event: %+v", v)
	}
	if got := string(SeriesPatch(4, time.Unix(100, 0).UTC())); got != `{"series":{"count":4,"lastObservedTime":"1970-01-01T00:01:40.000000Z"}}` {
		t.Errorf("SeriesPatch = %s", got)
	}
}
