package kctl

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

func TestInformerFault_SlowHandler_DoesNotStallTheWatchOrOtherHandlers(t *testing.T) {
	checkNoCacheLeaks(t)
	f := newFakeAPI(t, func(c fakeCall) {
		switch {
		case c.kind == "list":
			c.list("1", "")
		case c.n == 1:
			for i := range 100 {
				c.send("ADDED", cacheWidgetAt(fmt.Sprint("w", i), fmt.Sprint(i+2), 1))
			}
			c.hang()
		default:
			c.hang()
		}
	})
	conn, _ := NewConn(&rest.Config{Host: f.url})
	c := NewCache(conn, CacheOptions{})
	inf, _ := InformerFor[cacheWidget](c)
	release := make(chan struct{})
	slow, fast := &eventRecorder[cacheWidget]{}, &eventRecorder[cacheWidget]{}
	inf.AddHandler(func(e Event[cacheWidget]) { <-release; slow.handle(e) })
	inf.AddHandler(fast.handle)
	startCache(t, c)
	eventually(t, "100 objects stored and delivered to the fast handler", func() bool {
		n, _ := inf.Stats()
		return n == 100 && len(fast.all()) == 100
	})
	close(release)
	eventually(t, "the slow handler to catch up", func() bool { return len(slow.all()) == 100 })
	for i, e := range slow.all() {
		if want := fmt.Sprint("w", i); e.Object.Name != want {
			t.Fatalf("slow handler event %d is %s, want %s: out of order", i, e.Object.Name, want)
		}
	}
}

func TestInformerFault_LateHandlerAndResync_GetExistingObjects(t *testing.T) {
	checkNoCacheLeaks(t)
	f := newFakeAPI(t, func(c fakeCall) {
		if c.kind == "list" {
			c.list("2", "", cacheWidgetAt("a", "1", 1))
			return
		}
		c.hang()
	})
	inf, _, _ := fakeInformer(t, f, CacheOptions{Resync: 20 * time.Millisecond})
	if err := inf.WaitForSync(cacheTestCtx(t)); err != nil {
		t.Fatal(err)
	}
	late := &eventRecorder[cacheWidget]{}
	inf.AddHandler(late.handle)
	eventually(t, "a resync", func() bool { return len(late.all()) >= 2 })
	got := late.all()
	if describeEvent(got[0]) != "Added a@1 initial" || describeEvent(got[1]) != "Updated a@1 resync" || got[1].Old != got[1].Object {
		t.Errorf("late handler got %q, want the initial replay then resyncs with Old == Object", describeEvents(got))
	}
}
