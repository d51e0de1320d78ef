package kctl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

func TestInformerFault_ExpiredContinueToken_ListsAgainWithoutDuplicates(t *testing.T) {
	checkNoCacheLeaks(t)
	f := newFakeAPI(t, func(c fakeCall) {
		switch {
		case c.kind == "list" && c.param("limit") != "500":
			t.Errorf("list limit = %q, want 500", c.param("limit"))
		case c.kind == "list" && c.param("continue") == "":
			c.list("5", fmt.Sprint("page2-", c.n), cacheWidgetAt("a", "1", 1), cacheWidgetAt("b", "2", 1))
		case c.kind == "list" && c.param("continue") == "page2-1":
			c.status(410, metav1.StatusReasonExpired, "The provided continue parameter is too old")
		case c.kind == "list":
			c.list("7", "", cacheWidgetAt("c", "3", 1))
		default:
			c.hang()
		}
	})
	inf, rec, _ := fakeInformer(t, f, CacheOptions{})
	wantEvents(t, rec, "Added a@1 initial", "Added b@2 initial", "Added c@3 initial")
	if n, _ := inf.Stats(); n != 3 || !inf.HasSynced() {
		t.Errorf("Stats() = %d objects, HasSynced() = %v; want 3, true", n, inf.HasSynced())
	}
}

func TestInformerFault_ServerErrors_BackOffAndReport(t *testing.T) {
	checkNoCacheLeaks(t)
	start := time.Now()
	f := newFakeAPI(t, func(c fakeCall) {
		switch {
		case c.kind == "list" && c.n <= 2:
			c.status(503, metav1.StatusReasonServiceUnavailable, "etcd is down")
		case c.kind == "list" && c.n == 3:
			c.status(403, metav1.StatusReasonForbidden, `widgets.cachetest.kctl.dev is forbidden: User "x" cannot list`)
		case c.kind == "list":
			c.list("5", "", cacheWidgetAt("a", "1", 1))
		default:
			c.hang()
		}
	})
	inf, _, logs := fakeInformer(t, f, CacheOptions{})
	eventually(t, "a Forbidden error", func() bool { return apierrors.IsForbidden(inf.Err()) })
	eventually(t, "the sync", inf.HasSynced)
	if err := inf.Err(); err != nil {
		t.Errorf("Err() = %v after a successful list", err)
	}
	// Three failures wait at least half of 200ms, 400ms and 800ms.
	if d := time.Since(start); d < 700*time.Millisecond {
		t.Errorf("synced %v after three failures: no backoff", d)
	}
	lines := logs.lines("list failed, retrying")
	if len(lines) != 3 || !strings.Contains(lines[0], "retryIn=") || !strings.Contains(lines[2], "forbidden") {
		t.Errorf("want three log lines saying what failed and when it retries, got:\n%s", logs)
	}
}

func TestInformerFault_NotInstalled_WaitsStartsAndWaitsAgain(t *testing.T) {
	checkNoCacheLeaks(t)
	var mu sync.Mutex
	var crd chan struct{} // closed when the CRD is deleted; nil while it is not installed
	setInstalled := func(v bool) {
		mu.Lock()
		defer mu.Unlock()
		if v {
			crd = make(chan struct{})
		} else {
			close(crd)
			crd = nil
		}
	}
	f := newFakeAPI(t, func(c fakeCall) {
		mu.Lock()
		deleted := crd
		mu.Unlock()
		switch {
		case deleted == nil:
			c.status(404, metav1.StatusReasonNotFound, "the server could not find the requested resource")
		case c.kind == "list":
			c.list("5", "", cacheWidgetAt("a", "4", 1))
		default:
			c.w.(http.Flusher).Flush()
			select {
			case <-deleted: // the server ends the watch
			case <-c.r.Context().Done():
			}
		}
	})
	inf, rec, logs := fakeInformer(t, f, CacheOptions{})
	eventually(t, "not installed", func() bool { return errors.Is(inf.Err(), ErrNotInstalled) })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	err := inf.WaitForSync(ctx)
	cancel()
	if !errors.Is(err, ErrNotInstalled) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "widgets") {
		t.Errorf("WaitForSync() = %v, want an error naming widgets, matching ErrNotInstalled and the deadline", err)
	}
	setInstalled(true)
	wantEvents(t, rec, "Added a@4 initial")
	eventually(t, "healthy", func() bool { return inf.Err() == nil })
	setInstalled(false)
	eventually(t, "not installed again", func() bool { return errors.Is(inf.Err(), ErrNotInstalled) })
	if n := len(logs.lines("level=WARN")); n > 4 {
		t.Errorf("%d warnings for a missing CRD; want the first of each outage only:\n%s", n, logs)
	}
}

// A protobuf list in pages: each next page is asked for while the one before
// is decoded. A continue token that expires meanwhile relists from the start;
// every object is stored and reported once, and no fetch outlives the list.
func TestInformerFault_ProtobufPages_OverlapAndRelistOnExpiry(t *testing.T) {
	checkNoCacheLeaks(t)
	page := func(from, to int, rv, next string) []byte {
		list := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: rv, Continue: next}}
		for i := from; i < to; i++ {
			list.Items = append(list.Items, *realisticPod(i))
		}
		raw, err := list.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return envelope("PodList", raw)
	}
	f := newFakeAPI(t, func(c fakeCall) {
		body := []byte(nil)
		switch tok := c.param("continue"); {
		case c.kind == "watch":
			c.hang()
			return
		case tok == "":
			body = page(0, 500, "10", fmt.Sprint("p2-", c.n))
		case strings.HasPrefix(tok, "p2-"):
			body = page(500, 1000, "10", "p3-"+tok[3:])
		case tok == "p3-1": // the first list's last page: expired
			c.status(410, metav1.StatusReasonExpired, "The provided continue parameter is too old")
			return
		default:
			body = page(1000, 1200, "10", "")
		}
		c.w.Header().Set("Content-Type", mediaProtobuf)
		c.w.Write(body)
	})
	conn, err := NewConn(&rest.Config{Host: f.url})
	if err != nil {
		t.Fatal(err)
	}
	c := NewCache(conn, CacheOptions{Logger: slog.New(slog.DiscardHandler)})
	pods, err := InformerFor[corev1.Pod](c)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	added := map[string]int{}
	pods.AddHandler(func(e Event[corev1.Pod]) {
		mu.Lock()
		defer mu.Unlock()
		added[e.Object.Name]++
	})
	startCache(t, c)
	eventually(t, "the sync", pods.HasSynced)
	eventually(t, "1200 Added events", func() bool { mu.Lock(); defer mu.Unlock(); return len(added) == 1200 })
	mu.Lock()
	for name, n := range added {
		if n != 1 {
			t.Errorf("%s added %d times", name, n)
		}
	}
	mu.Unlock()
	if n, _ := pods.Stats(); n != 1200 {
		t.Errorf("%d Pods stored, want 1200", n)
	}
	var lists []string
	for _, r := range f.requests() {
		if strings.HasPrefix(r, "list") {
			lists = append(lists, r[strings.Index(r, "continue="):])
		}
	}
	if want := []string{"continue=", "continue=p2-1", "continue=p3-1", "continue=", "continue=p2-4", "continue=p3-4"}; !slices.Equal(lists, want) {
		t.Errorf("lists asked for %q, want %q", lists, want)
	}
}

// While the first page is still being prepared for the store, the informer
// has asked for at most two pages more: read-ahead is bounded.
func TestInformerFault_ProtobufPages_ReadAheadIsBounded(t *testing.T) {
	checkNoCacheLeaks(t)
	const pages = 20
	var asked atomic.Int32
	f := newFakeAPI(t, func(c fakeCall) {
		if c.kind == "watch" {
			c.hang()
			return
		}
		asked.Add(1)
		n, _ := strconv.Atoi(c.param("continue"))
		list := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "10"}}
		if n+1 < pages {
			list.Continue = strconv.Itoa(n + 1)
		}
		for i := range 5 {
			list.Items = append(list.Items, *realisticPod(n*5 + i))
		}
		raw, _ := list.Marshal()
		c.w.Header().Set("Content-Type", mediaProtobuf)
		c.w.Write(envelope("PodList", raw))
	})
	conn, err := NewConn(&rest.Config{Host: f.url})
	if err != nil {
		t.Fatal(err)
	}
	c := NewCache(conn, CacheOptions{Logger: slog.New(slog.DiscardHandler)})
	var first atomic.Bool
	var askedWhileBlocked int32
	if err := TransformFor[corev1.Pod](c, func(p *corev1.Pod) {
		if first.CompareAndSwap(false, true) {
			for deadline := time.Now().Add(5 * time.Second); asked.Load() < 3 && time.Now().Before(deadline); {
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(200 * time.Millisecond) // room for a fourth request, which must not come
			askedWhileBlocked = asked.Load()
		}
	}); err != nil {
		t.Fatal(err)
	}
	pods, err := InformerFor[corev1.Pod](c)
	if err != nil {
		t.Fatal(err)
	}
	startCache(t, c)
	eventually(t, "the sync", pods.HasSynced)
	if askedWhileBlocked != 3 {
		t.Errorf("%d pages asked for while page 1 was prepared, want 3 (it and two ahead)", askedWhileBlocked)
	}
	if n, _ := pods.Stats(); n != pages*5 {
		t.Errorf("%d Pods stored, want %d", n, pages*5)
	}
}

// Stopping the cache while a paged list is under way ends the list: pages
// asked for early that end with the stop do not leave it waiting.
func TestInformerFault_ProtobufPages_StopMidList(t *testing.T) {
	checkNoCacheLeaks(t)
	f := newFakeAPI(t, func(c fakeCall) {
		if c.kind == "watch" {
			c.hang()
			return
		}
		n, _ := strconv.Atoi(c.param("continue"))
		list := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "10", Continue: strconv.Itoa(n + 1)}}
		list.Items = append(list.Items, *realisticPod(n))
		raw, _ := list.Marshal()
		c.w.Header().Set("Content-Type", mediaProtobuf)
		c.w.Write(envelope("PodList", raw)) // pages without end
	})
	conn, err := NewConn(&rest.Config{Host: f.url})
	if err != nil {
		t.Fatal(err)
	}
	c := NewCache(conn, CacheOptions{Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithCancel(context.Background())
	var first atomic.Bool
	if err := TransformFor[corev1.Pod](c, func(p *corev1.Pod) {
		if first.CompareAndSwap(false, true) { // page 1 waits here until the stop
			cancel()
			time.Sleep(300 * time.Millisecond) // the fetches asked for early see the stop meanwhile
		}
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := InformerFor[corev1.Pod](c); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Cache.Start did not return within 10s of its context ending mid-list")
	}
}

func TestInformerFault_ListWithAnUndecodableObject_SyncsTheOthersAndLogsIt(t *testing.T) {
	checkNoCacheLeaks(t)
	f := newFakeAPI(t, func(c fakeCall) {
		if c.kind == "watch" {
			c.hang()
			return
		}
		c.w.Header().Set("Content-Type", "application/json")
		c.w.Write([]byte(`{"metadata":{"resourceVersion":"5"},"items":[{"metadata":{"name":"a","namespace":"default","resourceVersion":"3"}},` +
			`{"metadata":{"name":"bad","namespace":"default"},"spec":{"size":"huge"}}]}`))
	})
	inf, rec, logs := fakeInformer(t, f, CacheOptions{})
	if err := inf.WaitForSync(cacheTestCtx(t)); err != nil {
		t.Fatal(err)
	}
	wantEvents(t, rec, "Added a@3 initial")
	if l := logs.linesEventually(t, "could not decode", 1); len(l) != 1 || !strings.Contains(l[0], "default/bad") {
		t.Errorf("want one log line naming default/bad, got:\n%s", logs)
	}
	if f.count("list") != 1 {
		t.Errorf("%d lists, want 1: an undecodable object must not fail the list", f.count("list"))
	}
}

func TestInformerFault_ProtobufPods_StoredWithoutManagedFieldsAndBadOnesSkipped(t *testing.T) {
	checkNoCacheLeaks(t)
	conn := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") == "true" {
			w.Header().Set("Content-Type", mediaProtobuf+";stream=watch")
			w.Write(watchFrame("MODIFIED", envelope("Pod", badPodProto("shop", "broken-2"))))
			w.Write(watchFrame("ADDED", podProto(realisticPod(2))))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		w.Header().Set("Content-Type", mediaProtobuf)
		w.Write(podPage("9", "", rawPod(0), badPodProto("shop", "broken-1"), rawPod(1)))
	})
	for _, keep := range []bool{false, true} {
		logs, logger := newCacheLogs()
		c := NewCache(conn, CacheOptions{KeepManagedFields: keep, Logger: logger})
		inf, err := InformerFor[corev1.Pod](c)
		if err != nil {
			t.Fatal(err)
		}
		startCache(t, c)
		if err := inf.WaitForSync(cacheTestCtx(t)); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the pod added by the watch", func() bool { _, ok := inf.Get("shop", realisticPod(2).Name); return ok })
		for i := range 3 {
			want := realisticPod(i)
			want.APIVersion, want.Kind = "v1", "Pod"
			if !keep {
				want.ManagedFields = nil
			}
			if got, _ := inf.Get("shop", want.Name); !reflect.DeepEqual(got, want) {
				t.Errorf("KeepManagedFields=%v: stored pod %d =\n%+v\nwant\n%+v", keep, i, got, want)
			}
		}
		if l := logs.linesEventually(t, "could not decode", 2); len(l) != 2 || !strings.Contains(l[0], "shop/broken-1") || !strings.Contains(l[1], "shop/broken-2") {
			t.Errorf("KeepManagedFields=%v: want log lines naming shop/broken-1 and shop/broken-2, got:\n%s", keep, logs)
		}
	}
}
