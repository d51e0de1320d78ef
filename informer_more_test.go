package kctl

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestInformerFault_WaitForResourceVersion_ReturnsOnceABookmarkPassesIt(t *testing.T) {
	checkNoCacheLeaks(t)
	bookmark := make(chan struct{})
	f := newFakeAPI(t, func(c fakeCall) {
		switch {
		case c.kind == "list":
			c.list("10", "", cacheWidgetAt("a", "9", 1))
		case c.n == 1:
			c.send("MODIFIED", cacheWidgetAt("a", "11", 2))
			select { // or the server's Close would wait for this handler forever after a failure
			case <-bookmark:
			case <-c.r.Context().Done():
				return
			}
			b := cacheWidgetAt("", "100", 0)
			c.send("BOOKMARK", b)
			c.hang()
		default:
			c.hang()
		}
	})
	inf, _, _ := fakeInformer(t, f, CacheOptions{})
	if err := inf.WaitForResourceVersion(cacheTestCtx(t), "11"); err != nil {
		t.Fatal(err)
	}
	a, _ := inf.Get("default", "a")
	if a.ResourceVersion != "11" {
		t.Errorf("after WaitForResourceVersion(11), a is at %s", a.ResourceVersion)
	}
	if err := inf.waitForObject(cacheTestCtx(t), "default", "a", "11"); err != nil {
		t.Errorf("waitForObject(a@11) = %v", err)
	}
	if err := inf.waitForObject(cacheTestCtx(t), "default", "never-stored", "11"); err != nil {
		t.Errorf("waitForObject(never-stored@11) = %v, want nil: the watch is at 11", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	err := inf.WaitForResourceVersion(ctx, "50")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitForResourceVersion(50) before the bookmark = %v, want the deadline", err)
	}
	close(bookmark)
	if err := inf.WaitForResourceVersion(cacheTestCtx(t), "50"); err != nil {
		t.Errorf("WaitForResourceVersion(50) after a bookmark at 100 = %v", err)
	}
	if err := inf.WaitForResourceVersion(cacheTestCtx(t), "x1"); err == nil {
		t.Errorf("WaitForResourceVersion(x1) accepted a malformed resourceVersion")
	}
}
