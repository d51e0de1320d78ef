package kctl

// The informer's list/watch loop: list in pages (or with the watch-list
// stream, watch_list.go, where it is set), then watch from the newest
// resourceVersion, list again when that is gone, and back off on
// failures. What it lists and watches reaches the store, and the
// handlers, through apply.go.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/kctl-dev/kctl/internal/pager"
	"github.com/kctl-dev/kctl/internal/watchretry"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	cachePageSize = 500
	healthyWatch  = 10 * time.Second // a watch open this long resets the backoff
)

// run runs the informer until ctx ends, then waits for its goroutines. Called once, by the Cache.
func (i *informer[P]) run(ctx context.Context) {
	i.mu.Lock()
	i.ctx = ctx
	for _, h := range i.handlers {
		i.goLocked(h.run)
	}
	for _, w := range i.watches {
		i.goLocked(func(ctx context.Context) { i.listWatch(ctx, w) })
	}
	if i.resync != nil {
		i.goLocked(i.resync)
	}
	i.mu.Unlock()
	<-ctx.Done()
	i.mu.Lock()
	i.stopped = true
	i.notifyLocked()
	i.mu.Unlock()
	i.wg.Wait()
}

// listWatch keeps the store equal to the server's objects in w's namespace
// until ctx ends; it lists again only when the watch's resourceVersion is
// gone. A list is the watch-list stream (i.stream) where it is set and
// served, else a list in pages, then a watch.
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
		start := time.Now()
		var err error
		streamed := false
		if relist && i.stream != nil {
			var synced bool
			synced, err = i.stream(actx, w)
			streamed = !errors.Is(err, errPaged)
			switch {
			case !streamed: // in pages, below
			case ctx.Err() != nil:
				return
			case actx.Err() != nil:
				continue // resharded
			case !synced:
				fails++
				i.retry(ctx, w, "list", err, fails)
				continue
			}
		}
		if relist && !streamed {
			err = i.list(actx, w)
			if actx.Err() != nil && ctx.Err() == nil {
				continue // resharded: list again at once
			}
			if err != nil {
				fails++
				i.retry(ctx, w, "list", err, fails)
				continue
			}
		}
		relist = false
		if !streamed {
			start = time.Now()
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
		case watchretry.Gone(err), isNotInstalled(err):
			relist = true
		}
		if healthy || relist && !listed {
			fails = 0 // after a 410 or 404 the server answers again: list soon, unless it keeps answering this
		}
		fails++
		i.retry(ctx, w, "watch", err, fails)
	}
}

// errPaged is what informer.stream returns, at once, where the server
// does not serve the watch-list stream: list in pages instead.
var errPaged = errors.New("kctl: list in pages")

// list lists w's namespace in pages (so the response buffer stays small),
// stores the result and tells the handlers what changed. Pages are
// fetched up to two ahead of the one readied for the store
// (internal/pager, internal/readahead).
func (i *informer[P]) list(ctx context.Context, w *watchState) error {
	fetch := func(
		ctx context.Context,
		token string,
		early func(metav1.ListMeta),
	) ([]P, metav1.ListMeta, []error, error) {
		opts := w.listOpts()
		return i.client.listPage(ctx, opts, cachePageSize, token, early)
	}
	var all []P
	var bad []*decodeError
	use := func(objs []P, skipped []error) {
		for _, err := range skipped {
			bad = append(bad, i.keyed(err))
		}
		for _, obj := range objs {
			i.transform(obj)
			i.sharer.Share(obj)
			all = append(all, obj)
		}
	}
	rv, err := pager.Ahead(ctx, 2, fetch, use)
	if err != nil {
		return err
	}
	i.stored(w, all, bad, rv)
	return nil
}

// watchOnce applies the events of one watch from w.rv: nil if the server
// ended it cleanly.
func (i *informer[P]) watchOnce(ctx context.Context, w *watchState) error {
	timeout := watchretry.Timeout(i.watchFor)
	stream, err := i.client.watch(ctx, w.listOpts(), w.rv, timeout)
	if err != nil {
		return err
	}
	defer stream.Close()
	i.setErr(w, nil)
	return i.follow(w, stream)
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

// retry records and logs the n-th failure in a row of op, then waits out
// the backoff (internal/watchretry).
func (i *informer[P]) retry(ctx context.Context, w *watchState, op string, err error, n int) {
	missing := isNotInstalled(err)
	// a CRD still missing was said once; the poll goes on quietly
	quiet := missing && w.err != nil && isNotInstalled(w.err)
	i.setErr(w, err) // client errors name the request and the resource
	msg := "kctl: cache " + op + " failed, retrying"
	watchretry.Pause(ctx, i.log, quiet, n, err, missing, msg,
		"resource", i.res.String(), "namespace", w.opts.Namespace)
}

func (i *informer[P]) setErr(w *watchState, err error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	w.err = err
	i.notifyLocked()
}

// isNotInstalled reports whether the resource does not exist on the server (its CRD is missing).
func isNotInstalled(err error) bool {
	return errors.Is(err, ErrNotInstalled) || apierrors.IsNotFound(err)
}
