package kctl

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
)

// A type's Scope reaches the server: every list and every watch, one per
// namespace of the scope, sends the scope's label and field selectors.
func TestInformerFault_Scope_LabelsAndFieldsAreSentOnEveryListAndWatch(t *testing.T) {
	checkNoCacheLeaks(t)
	var mu sync.Mutex
	var got []string // "list a labels=... fields=...", one per request
	f := newFakeAPI(t, func(c fakeCall) {
		ns := strings.Split(c.r.URL.Path, "/")[5] // /apis/group/v1/namespaces/NS/widgets
		mu.Lock()
		got = append(got, fmt.Sprintf("%s %s labels=%s fields=%s", c.kind, ns, c.param("labelSelector"), c.param("fieldSelector")))
		mu.Unlock()
		if c.kind == "list" {
			c.list("1", "")
			return
		}
		c.hang()
	})
	conn, err := NewConn(&rest.Config{Host: f.url})
	if err != nil {
		t.Fatal(err)
	}
	c := NewCache(conn, CacheOptions{})
	scope := Scope{Namespaces: []string{"a", "b"}, Labels: labels.SelectorFromSet(labels.Set{"app": "web"}), Fields: "metadata.name=w"}
	if err := ScopeFor[cacheWidget](c, scope); err != nil {
		t.Fatal(err)
	}
	inf, err := InformerFor[cacheWidget](c)
	if err != nil {
		t.Fatal(err)
	}
	startCache(t, c)
	if err := inf.WaitForSync(cacheTestCtx(t)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "two watches", func() bool { return f.count("watch") == 2 })
	want := []string{
		"list a labels=app=web fields=metadata.name=w", "list b labels=app=web fields=metadata.name=w",
		"watch a labels=app=web fields=metadata.name=w", "watch b labels=app=web fields=metadata.name=w",
	}
	mu.Lock()
	defer mu.Unlock()
	if sorted := slices.Sorted(slices.Values(got)); !slices.Equal(sorted, want) {
		t.Errorf("requests:\n got %q\nwant %q", sorted, want)
	}
}

// A watch that stays open for the healthy time (10 s; shortened here) resets
// the backoff: when it fails, the retry counts as the first failure, not as
// one more after those before it.
func TestInformerFault_WatchOpenLongEnough_ResetsTheBackoff(t *testing.T) {
	checkNoCacheLeaks(t)
	const healthy, held = 200 * time.Millisecond, 600 * time.Millisecond
	f := newFakeAPI(t, func(c fakeCall) {
		switch {
		case c.kind == "list":
			c.list("10", "")
		case c.n <= 2:
			c.status(http.StatusInternalServerError, metav1.StatusReasonInternalError, "watch failed at once")
		case c.n == 3:
			c.w.(http.Flusher).Flush()
			select {
			case <-time.After(held): // open for longer than healthy, then cut
			case <-c.r.Context().Done():
				return
			}
			panic(http.ErrAbortHandler)
		default:
			c.hang()
		}
	})
	conn, err := NewConn(&rest.Config{Host: f.url})
	if err != nil {
		t.Fatal(err)
	}
	logs, logger := newCacheLogs()
	c := NewCache(conn, CacheOptions{Logger: logger})
	inf, err := InformerFor[cacheWidget](c)
	if err != nil {
		t.Fatal(err)
	}
	inf.healthy = healthy // before the informer runs
	startCache(t, c)
	eventually(t, "a fourth watch", func() bool { return f.count("watch") == 4 })
	lines := logs.lines("watch failed, retrying")
	wantFailures := []string{"failures=1 ", "failures=2 ", "failures=1 "}
	ok := len(lines) == len(wantFailures)
	for n := 0; ok && n < len(lines); n++ {
		ok = strings.Contains(lines[n], wantFailures[n])
	}
	if !ok {
		t.Errorf("want two quick failures, then a failure after a healthy watch counted as the first (%q); got:\n%s",
			wantFailures, strings.Join(lines, "\n"))
	}
}

func TestRetryDelay_DoublesUpToTheCapWithJitterAndRetryAfter(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		n          int
		r          float64
		retryAfter time.Duration
		want       time.Duration
	}{
		{1, 0, 0, 200 * ms},
		{2, 0, 0, 400 * ms},
		{1, 0.5, 0, 150 * ms},
		{1, 0.999999, 0, 100 * ms},
		{8, 0, 0, 25600 * ms},
		{9, 0, 0, 30 * time.Second},
		{1000, 0, 0, 30 * time.Second},
		{1, 0, 5 * time.Second, 5 * time.Second},
	} {
		if got := retryDelay(c.n, 30*time.Second, c.r, c.retryAfter).Round(ms); got != c.want {
			t.Errorf("retryDelay(%d, 30s, %v, %v) = %v, want %v", c.n, c.r, c.retryAfter, got, c.want)
		}
	}
}

func TestIsGone_RecognizesEveryFormOfTooOld(t *testing.T) {
	gr := corev1.Resource("configmaps")
	for _, c := range []struct {
		err  error
		want bool
	}{
		{apierrors.NewResourceExpired("too old resource version: 1 (5)"), true},
		{apierrors.NewGone("gone"), true},
		{&apierrors.StatusError{ErrStatus: metav1.Status{Code: 410, Message: "expired"}}, true},
		{fmt.Errorf("kctl: watch: %w", apierrors.NewResourceExpired("The provided continue parameter is too old")), true},
		{errors.New("too old resource version: 1 (5)"), true},
		{apierrors.NewNotFound(gr, "x"), false},
		{apierrors.NewForbidden(gr, "x", errors.New("no")), false},
	} {
		if got := isGone(c.err); got != c.want {
			t.Errorf("isGone(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
