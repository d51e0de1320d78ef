package kctl

// Floor 2: the watch-list stream (sendInitialEvents), a list and a watch
// in one request, on the informer's stream hook (list_watch.go): every
// object comes as an event, then a bookmark ends the initial ones, then
// the changes follow, so no list page is ever held whole. NewCache and
// NewManager switch it on in every informer (the Cache's made hook),
// unless $KUBE_FEATURE_WatchListClient is false; once the server
// refuses it, the informer lists in pages. The request itself,
// client.watchList, is last, a watch of floor 1's (openWatch).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kctl-dev/kctl/internal/watchretry"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// watchListClient reports whether informers first sync with the
// watch-list stream: unless $KUBE_FEATURE_WatchListClient, client-go's
// switch for the same, is false.
var watchListClient = sync.OnceValue(func() bool {
	env := os.Getenv("KUBE_FEATURE_WatchListClient")
	on, err := strconv.ParseBool(env)
	return on || err != nil
})

// streamByWatchList is what NewCache and NewManager put on the Cache's
// made hook: every informer made, of objects or of metadata, syncs with
// the watch-list stream (useWatchList).
func streamByWatchList(inf cachedInformer) {
	streamer, ok := inf.(interface{ useWatchList() })
	if ok {
		streamer.useWatchList()
	}
}

// useWatchList fills the informer's stream hook (informer.stream) with
// its watch-list stream, until the server refuses it; it leaves it nil
// where $KUBE_FEATURE_WatchListClient is false. Once refused, the
// informer lists in pages from then on, and logs it once. Call it
// before the informer runs (the Cache's made hook).
func (i *informer[P]) useWatchList() {
	if !watchListClient() {
		return
	}
	var paged atomic.Bool
	i.stream = func(ctx context.Context, w *watchState) (bool, error) {
		if paged.Load() {
			return false, errPaged
		}
		synced, err := i.watchList(ctx, w)
		if synced || !refused(err) {
			return synced, err
		}
		if paged.CompareAndSwap(false, true) {
			msg := "kctl: the API server refused the watch-list " +
				"stream; the cache lists in pages instead"
			i.log.Info(msg, "resource", i.name, "err", err)
		}
		return false, errPaged
	}
}

// watchList is a list and a watch in one request, the watch-list stream
// (Client.watchList): it collects the initial events as list does its
// pages, stores them as a list's result once the bookmark that ends them
// comes (synced), then follows the changes as watchOnce does. It holds no
// list page: each object is decoded, readied and shared as it comes.
// Before synced, err may be the server refusing the stream (refused).
func (i *informer[P]) watchList(
	ctx context.Context,
	w *watchState,
) (synced bool, err error) {
	timeout := watchretry.Timeout(i.watchFor)
	start := time.Now()
	stream, err := i.client.watchList(ctx, w.listOpts(), timeout)
	if err != nil {
		return false, err
	}
	events, stop := readAhead(stream)
	defer stop()
	var all []P
	var bad []*decodeError
	for {
		r := <-events
		e := r.event
		err := r.err
		if err == io.EOF && time.Since(start) >= timeout {
			err = errNoInitialEventsEnd
		}
		if err != nil {
			return false, err
		}
		obj := e.Object
		switch {
		case e.Type == "ERROR" && e.Status != nil:
			return false, i.apply(w, e)
		case e.Type == "BOOKMARK" && initialEventsEnd(obj):
			rv := metaOf(obj).GetResourceVersion()
			i.stored(w, all, bad, rv)
			all = nil
			return true, i.follow(w, stream)
		case e.Type == "BOOKMARK":
		case e.Type == "ADDED" && e.Err == nil:
			i.transform(obj)
			i.sharer.Share(obj)
			all = append(all, obj)
		case e.Type == "ADDED":
			bad = append(bad, i.keyed(e.Err))
		default:
			return false, fmt.Errorf("kctl: the watch-list "+
				"stream of %s sent a %s event before "+
				"the end of its initial events", i.res, e.Type)
		}
	}
}

// readEvent is one event read ahead, or the error that ended the stream.
type readEvent[P any] struct {
	event watchEvent[P]
	err   error
}

// readAhead reads and decodes the initial events of a watch-list stream
// in a goroutine of its own, up to 64 ahead of the caller, so that the
// objects of one are decoded while those before are readied (as list's
// pages are). It stops after an error or an event that ends the initial
// ones. stop closes the stream and waits for the goroutine: call it once
// done with the stream; the stream is the caller's once that event came.
func readAhead[P any](
	stream *watchStream[P],
) (events <-chan readEvent[P], stop func()) {
	ch := make(chan readEvent[P], 64)
	done := make(chan struct{})
	var reader sync.WaitGroup
	reader.Go(func() {
		for {
			var r readEvent[P]
			r.event, r.err = stream.Next()
			select {
			case ch <- r:
			case <-done:
				return
			}
			typ := r.event.Type
			more := typ == "ADDED" ||
				typ == "BOOKMARK" &&
					!initialEventsEnd(r.event.Object)
			if r.err != nil || !more {
				return
			}
		}
	})
	stop = func() {
		close(done)
		stream.Close()
		reader.Wait()
	}
	return ch, stop
}

// errNoInitialEventsEnd: a watch-list stream lasted its whole timeout
// without the bookmark that ends the initial events. The server ignores
// sendInitialEvents (older than Kubernetes 1.27): refused.
var errNoInitialEventsEnd = errors.New("kctl: the watch-list stream " +
	"ended at its timeout without the bookmark that ends " +
	"its initial events: the server ignores sendInitialEvents")

// initialEventsEnd reports whether obj, a bookmark's, marks the end of a
// watch-list stream's initial events.
func initialEventsEnd[P any](obj P) bool {
	if isNil(obj) {
		return false
	}
	a := metaOf(obj).GetAnnotations()
	return a[metav1.InitialEventsAnnotationKey] == "true"
}

// refused reports whether err is the server refusing the watch-list
// stream: 422 Invalid or 400 Bad Request when its WatchList feature is
// off, or errNoInitialEventsEnd.
func refused(err error) bool {
	return apierrors.IsInvalid(err) ||
		apierrors.IsBadRequest(err) ||
		errors.Is(err, errNoInitialEventsEnd)
}

// watchList opens the watch-list stream (KEP-3157): an ADDED event for
// each object in opts as of now, then a BOOKMARK whose annotation
// metav1.InitialEventsAnnotationKey marks the end of them (at the list's
// resourceVersion), then the changes, as watch's. A server without the
// WatchList feature refuses it: 422 Invalid.
func (c *client[P]) watchList(
	ctx context.Context,
	opts ListOptions,
	timeout time.Duration,
) (*watchStream[P], error) {
	q := opts.query()
	q.Set("sendInitialEvents", "true")
	q.Set("resourceVersionMatch", "NotOlderThan")
	return c.openWatch(ctx, opts.Namespace, q, timeout)
}
