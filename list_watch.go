package kctl

// The informer's list/watch loop: list with the watch-list stream (or, if
// the server refuses it, in pages, then watch from the newest
// resourceVersion), list again when that is gone, and back off on
// failures. What it lists and watches reaches the store, and the
// handlers, through apply.go.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kctl-dev/kctl/internal/readahead"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	cachePageSize         = 500
	firstRetryDelay       = 200 * time.Millisecond
	maxRetryDelay         = 30 * time.Second
	notInstalledPollDelay = 10 * time.Second // the longest wait for a CRD to appear
	healthyWatch          = 10 * time.Second // a watch open this long resets the backoff
)

// run runs the informer until ctx ends, then waits for its goroutines. Called once, by the Cache.
func (i *informer[P]) run(ctx context.Context) {
	if !watchListClient() {
		i.paged.Store(true)
	}
	i.mu.Lock()
	i.ctx = ctx
	for _, h := range i.handlers {
		i.goLocked(h.run)
	}
	for _, w := range i.watches {
		i.goLocked(func(ctx context.Context) { i.listWatch(ctx, w) })
	}
	if i.resync > 0 {
		i.goLocked(i.resyncEvery)
	}
	i.mu.Unlock()
	<-ctx.Done()
	i.mu.Lock()
	i.stopped = true
	i.notifyLocked()
	i.mu.Unlock()
	i.wg.Wait()
}

// watchListClient reports whether informers first sync with the
// watch-list stream: unless $KUBE_FEATURE_WatchListClient, client-go's
// switch for the same, is false.
var watchListClient = sync.OnceValue(func() bool {
	env := os.Getenv("KUBE_FEATURE_WatchListClient")
	on, err := strconv.ParseBool(env)
	return on || err != nil
})

// listWatch keeps the store equal to the server's objects in w's namespace
// until ctx ends; it lists again only when the watch's resourceVersion is
// gone. A list is the watch-list stream (watchList) unless the server
// refused it (then i.paged): a list in pages, then a watch.
func (i *informer[P]) listWatch(ctx context.Context, w *watchState) {
	defer i.end(w)
	fails := 0
	relist := true
	for ctx.Err() == nil {
		actx, resharded := i.begin(ctx, w)
		if resharded {
			relist = true
			fails = 0
		}
		listed := relist
		streamed := relist && !i.paged.Load()
		if relist && !streamed {
			err := i.list(actx, w)
			if actx.Err() != nil && ctx.Err() == nil {
				continue // resharded: list again at once
			}
			if err != nil {
				fails++
				i.retry(ctx, w, "list", err, fails)
				continue
			}
			relist = false
		}
		start := time.Now()
		var err error
		if streamed {
			var synced bool
			synced, err = i.watchList(actx, w)
			switch {
			case ctx.Err() != nil:
				return
			case actx.Err() != nil:
				continue // resharded
			case !synced && i.refused(err):
				continue // at once, in pages
			case !synced:
				fails++
				i.retry(ctx, w, "list", err, fails)
				continue
			}
			relist = false
		} else {
			err = i.watchOnce(actx, w)
		}
		healthy := time.Since(start) >= i.healthy
		switch {
		case ctx.Err() != nil:
			return
		case actx.Err() != nil:
			continue // resharded
		case err == nil && healthy:
			fails = 0
			continue // the server ended the watch at its timeout
		case err == nil:
			err = fmt.Errorf("kctl: the server closed the watch of %s after %v", i.res, time.Since(start).Round(time.Millisecond))
		case isGone(err), isNotInstalled(err):
			relist = true
		}
		if healthy || relist && !listed {
			fails = 0 // after a 410 or 404 the server answers again: list soon, unless it keeps answering this
		}
		fails++
		i.retry(ctx, w, "watch", err, fails)
	}
}

// listedPage is one page of a list.
type listedPage[P any] struct {
	objs    []P
	meta    metav1.ListMeta
	skipped []error
}

// list lists w's namespace in pages (so the response buffer stays small),
// stores the result and tells the handlers what changed. Pages are
// fetched up to two ahead of the one readied for the store
// (internal/readahead).
func (i *informer[P]) list(ctx context.Context, w *watchState) error {
	fetch := func(
		ctx context.Context,
		token string,
		early func(next string),
	) (listedPage[P], string, error) {
		var p listedPage[P]
		var err error
		onMeta := func(m metav1.ListMeta) { early(m.Continue) }
		p.objs, p.meta, p.skipped, err = i.client.listPage(
			ctx, w.listOpts(), cachePageSize, token, onMeta)
		return p, p.meta.Continue, err
	}
	var all []P
	var bad []*decodeError
	rv := ""
	use := func(p listedPage[P]) {
		for _, err := range p.skipped {
			bad = append(bad, i.keyed(err))
		}
		for _, obj := range p.objs {
			i.transform(obj)
			i.sharer.Share(obj)
			all = append(all, obj)
		}
		rv = p.meta.ResourceVersion
	}
	err := readahead.Pages(ctx, 2, fetch, use)
	if err != nil {
		return err
	}
	i.stored(w, all, bad, rv)
	return nil
}

// watchOnce applies the events of one watch from w.rv: nil if the server
// ended it cleanly.
func (i *informer[P]) watchOnce(ctx context.Context, w *watchState) error {
	timeout := i.watchTimeout()
	stream, err := i.client.watch(ctx, w.listOpts(), w.rv, timeout)
	if err != nil {
		return err
	}
	defer stream.Close()
	i.setErr(w, nil)
	return i.follow(w, stream)
}

// watchTimeout is how long a watch asks the server to last.
func (i *informer[P]) watchTimeout() time.Duration {
	if i.watchFor > 0 {
		return i.watchFor
	}
	return 5*time.Minute + rand.N(5*time.Minute)
}

// follow applies the events of stream until it ends: nil if the server
// ended it cleanly.
func (i *informer[P]) follow(w *watchState, stream *watchStream[P]) error {
	var err error
	for err == nil {
		var e watchEvent[P]
		e, err = stream.Next()
		if err == nil {
			err = i.apply(w, e)
		}
	}
	if err == io.EOF {
		return nil
	}
	return err
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
	timeout := i.watchTimeout()
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
// off, or errNoInitialEventsEnd. The informer then lists in pages from
// now on, and logs it once.
func (i *informer[P]) refused(err error) bool {
	isRefusal := apierrors.IsInvalid(err) ||
		apierrors.IsBadRequest(err) ||
		errors.Is(err, errNoInitialEventsEnd)
	if !isRefusal {
		return false
	}
	if i.paged.CompareAndSwap(false, true) {
		msg := "kctl: the API server refused the watch-list " +
			"stream; the cache lists in pages instead"
		i.log.Info(msg, "resource", i.name, "err", err)
	}
	return true
}

// retry records and logs the n-th failure in a row of op, then waits out the backoff.
func (i *informer[P]) retry(ctx context.Context, w *watchState, op string, err error, n int) {
	limit := maxRetryDelay
	level := slog.LevelWarn
	after := time.Duration(0)
	if isNotInstalled(err) {
		limit = notInstalledPollDelay
		if w.err != nil && isNotInstalled(w.err) {
			level = slog.LevelDebug // said once; the poll goes on quietly
		}
	}
	if s, ok := apierrors.SuggestsClientDelay(err); ok {
		after = time.Duration(s) * time.Second
	}
	d := retryDelay(n, limit, rand.Float64(), after)
	i.setErr(w, err) // client errors name the request and the resource
	i.log.Log(ctx, level, "kctl: cache "+op+" failed, retrying", "resource", i.res.String(),
		"namespace", w.opts.Namespace, "retryIn", d.Round(time.Millisecond), "failures", n, "err", err)
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func (i *informer[P]) setErr(w *watchState, err error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	w.err = err
	i.notifyLocked()
}

// retryDelay is the wait before retry n (1, 2, ...): 200ms doubling up to limit,
// less up to half (r in [0, 1)), and at least the server's Retry-After.
func retryDelay(n int, limit time.Duration, r float64, retryAfter time.Duration) time.Duration {
	d := limit
	if n < 30 && firstRetryDelay<<(n-1) < limit {
		d = firstRetryDelay << (n - 1)
	}
	return max(d-time.Duration(r*float64(d)/2), retryAfter)
}

// isGone reports whether the resourceVersion or continue token is too old, so the informer must list again.
func isGone(err error) bool {
	var s apierrors.APIStatus
	return apierrors.IsGone(err) || apierrors.IsResourceExpired(err) || errors.As(err, &s) && s.Status().Code == 410 ||
		strings.Contains(err.Error(), "too old resource version")
}

// isNotInstalled reports whether the resource does not exist on the server (its CRD is missing).
func isNotInstalled(err error) bool {
	return errors.Is(err, ErrNotInstalled) || apierrors.IsNotFound(err)
}
