package transport

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kctl-dev/kctl/internal/protowire"
	corev1 "k8s.io/api/core/v1"
)

// A watch's own bound is a little past its timeoutSeconds (the other
// requests' 70 s is TestNew_NoTimeout_...).
func TestWatchBound_IsALittlePastTheTimeoutItAsks(t *testing.T) {
	for _, c := range []struct{ timeout, want time.Duration }{
		{time.Second, 2100 * time.Millisecond},
		{5 * time.Minute, 5*time.Minute + 31*time.Second},
		{10 * time.Minute, 10*time.Minute + 31*time.Second},
	} {
		if got := WatchBound(c.timeout); got != c.want {
			t.Errorf("WatchBound(%v) = %v, want %v", c.timeout, got, c.want)
		}
	}
}

// event is what Events.Next handed to its callback, copied.
type event struct{ typ, object string }

// nextEvents reads n events of e, failing on an error or a bad frame.
func nextEvents(t *testing.T, e *Events, n int) []event {
	t.Helper()
	var got []event
	for i := range n {
		bad, err := e.Next(func(typ string, object []byte) {
			got = append(got, event{typ, string(object)})
		})
		if bad != nil || err != nil {
			t.Fatalf("Next %d = %v, %v", i, bad, err)
		}
	}
	return got
}

// A JSON watch's events are read one by one whatever separates them, and
// an event larger than bigEvent, after which the decoder is made again
// from what it had read ahead, loses nothing before or after it.
func TestEvents_Next_JSONAroundABigEvent(t *testing.T) {
	big := `{"metadata":{"name":"big","annotations":{"a":"` + strings.Repeat("x", 3*bigEvent) + `"}}}`
	for _, sep := range []string{"\n", "", " \r\n\t"} {
		objects := []string{`{"metadata":{"name":"a"}}`, big, `{"metadata":{"name":"b"}}`, big, `{}`}
		var body strings.Builder
		for i, o := range objects {
			fmt.Fprintf(&body, `{"type":"T%d","object":%s}%s`, i, o, sep)
		}
		e := NewEvents("application/json", strings.NewReader(body.String()))
		got := nextEvents(t, e, len(objects))
		for i, o := range objects {
			if w := (event{fmt.Sprintf("T%d", i), o}); got[i] != w {
				t.Errorf("sep %q: event %d = %.40q, want %.40q", sep, i, got[i], w)
			}
		}
		if _, err := e.Next(func(string, []byte) {}); err != io.EOF {
			t.Errorf("sep %q: Next after the last event = %v, want io.EOF", sep, err)
		}
	}
}

// A protobuf watch's object is handed over in its envelope, as sent; a
// frame that is no watch event is bad, the stream going on after it.
func TestEvents_Next_ProtobufFramesAndABadOne(t *testing.T) {
	a := pbFrame(t, "ADDED", "Pod", namedPod("a", "1"))
	bad := lengthPrefixed([]byte{0x0a, 0x09, 'A'})
	body := slices.Concat(a, bad, pbFrame(t, "ERROR", "Status", expired))
	e := NewEvents(protowire.Media+";stream=watch", bytes.NewReader(body))

	got := nextEvents(t, e, 1)
	p := new(corev1.Pod)
	raw, err := protowire.Object([]byte(got[0].object), "Pod")
	if err == nil {
		err = p.Unmarshal(raw)
	}
	if got[0].typ != "ADDED" || err != nil || p.Name != "a" {
		t.Errorf("Next = %q, pod %q (%v), want ADDED a", got[0].typ, p.Name, err)
	}

	called := false
	badErr, err := e.Next(func(string, []byte) { called = true })
	if badErr == nil || err != nil || called {
		t.Errorf("Next(bad frame) = %v, %v, called %v; want bad, no error, not called", badErr, err, called)
	}

	got = nextEvents(t, e, 1)
	st, ok := DecodeStatus(protowire.Media, []byte(got[0].object))
	if got[0].typ != "ERROR" || !ok || st.Code != 410 {
		t.Errorf("Next = %q, Status %+v %v, want ERROR 410", got[0].typ, st, ok)
	}
	if _, err := e.Next(func(string, []byte) {}); err != io.EOF {
		t.Errorf("Next after the last frame = %v, want io.EOF", err)
	}
}
