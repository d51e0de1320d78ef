package kctl

// A Client's reads: Get and List (from the cache when the Client has one,
// see cache.go), and the list pages and watches an informer is fed by
// (the watch-list stream is on floor 2, watch_list.go; Uncached in
// client_more.go).

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/kctl-dev/kctl/internal/apitype"
	"github.com/kctl-dev/kctl/internal/errtext"
	"github.com/kctl-dev/kctl/internal/pager"
	"github.com/kctl-dev/kctl/internal/transport"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Get returns the object namespace/name (namespace "" if cluster-scoped): a
// copy from the cache if c has one (NotFound if the cache has no such object).
// A cached Get waits until the cache has synced, at most until ctx ends; of a
// resource the server does not serve (a CRD not applied) it fails at once
// with an error matching ErrNotInstalled, after at most one discovery request.
func (c *Client[T]) Get(ctx context.Context, namespace, name string) (*T, error) {
	return c.getObject(ctx, namespace, name)
}

// getObject is Get, over P.
func (c *client[P]) getObject(ctx context.Context, namespace, name string) (P, error) {
	if c.cached != nil && c.err == nil {
		return c.cached.get(ctx, namespace, name)
	}
	r := request{
		verb:      "get",
		method:    http.MethodGet,
		namespace: namespace,
		name:      name,
	}
	return c.object(ctx, r)
}

// List's page size, and how often a List whose continue token expired
// starts over.
const (
	listPageSize    = 500
	listMaxRestarts = 2
)

// List returns the objects matching opts (copies, from the cache, waiting
// for it as Get does, and failing naming a field selector it cannot evaluate:
// see Informer.List). From the server it reads pages of 500, starting over
// (at most twice) if the continue token expires (410 Gone). Undecodable
// objects are left out: List returns the others and an error naming them.
func (c *Client[T]) List(ctx context.Context, opts ListOptions) ([]*T, error) {
	return c.listObjects(ctx, opts)
}

// listObjects is List, over P.
func (c *client[P]) listObjects(ctx context.Context, opts ListOptions) ([]P, error) {
	if c.cached != nil && c.err == nil {
		return c.cached.list(ctx, opts)
	}
	page := func(token string) ([]P, string, []error, error) {
		items, meta, bad, err := c.listPage(
			ctx, opts, listPageSize, token, nil)
		return items, meta.Continue, bad, err
	}
	// pages joined; an expired token starts over (internal/pager)
	all, skipped, err := pager.All(page, listMaxRestarts)
	if err != nil || len(skipped) == 0 {
		return all, err
	}
	r := request{list: true, namespace: opts.Namespace}
	// an error naming each object left out (internal/errtext)
	return all, errtext.LeftOut(c.what(r), skipped)
}

// listPage is one List request (list_watch.go pages through it); limit 0
// means none. Undecodable objects are left out of items, skipped naming
// each; err is for the whole page. If early is set, it gets the page's
// ListMeta (a protobuf page's) as soon as the page is read, before its
// objects are decoded: time to ask for the next.
func (c *client[P]) listPage(
	ctx context.Context,
	opts ListOptions,
	limit int64,
	continueToken string,
	early func(metav1.ListMeta),
) (items []P, meta metav1.ListMeta, skipped []error, err error) {
	q := opts.query()
	// the page size and the page (internal/apitype)
	apitype.SetPage(q, limit, continueToken)
	r := request{
		verb:      "list",
		method:    http.MethodGet,
		namespace: opts.Namespace,
		list:      true,
		query:     q,
	}
	err = c.call(ctx, r, func(ct string, body []byte) (err error) {
		// a protobuf page's ListMeta, before decoding (internal/pager)
		pager.Early(ct, body, early)
		items, meta, skipped, err = c.codec.decodeList(ct, body)
		return err
	})
	return items, meta, skipped, err
}

// watch opens a watch from resourceVersion with bookmarks; the server ends
// it after timeout (rounded to seconds, at least 1 s). The client ends it
// at transport.WatchBound(timeout) if the server has not: a silent connection (a
// network blackhole over HTTP/1.1) then breaks the stream.
func (c *client[P]) watch(
	ctx context.Context,
	opts ListOptions,
	resourceVersion string,
	timeout time.Duration,
) (*watchStream[P], error) {
	q := opts.query()
	if resourceVersion != "" {
		q.Set("resourceVersion", resourceVersion)
	}
	return c.openWatch(ctx, opts.Namespace, q, timeout)
}

// openWatch opens a watch with bookmarks of namespace, asking with q.
func (c *client[P]) openWatch(
	ctx context.Context,
	namespace string,
	q url.Values,
	timeout time.Duration,
) (*watchStream[P], error) {
	// watch=true, bookmarks, timeoutSeconds (internal/apitype)
	timeout = apitype.SetWatch(q, timeout)
	r := request{
		verb:      "watch",
		method:    http.MethodGet,
		namespace: namespace,
		list:      true,
		query:     q,
	}
	ctx, cancel := transport.WatchDeadline(ctx, timeout, c.what(r))
	resp, err := c.send(ctx, r)
	if err != nil {
		cancel()
		return nil, err
	}
	ct := resp.Header.Get("Content-Type")
	body := transport.WatchBody(ctx, cancel, resp.Body)
	return newWatchStream(c.codec, ct, body), nil
}
