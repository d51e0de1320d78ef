package kctl

// The cached reads of a Manager's Clients (cachedReads): Get and List
// from the Cache's informers, as copies, after read-your-writes.

import (
	"context"

	"github.com/kctl-dev/kctl/internal/apitype"
	"github.com/kctl-dev/kctl/internal/readmiss"
)

// cachedReads serves the Get and List of a Manager's Client (ClientFor)
// from the cache: as copies, once T's informer has synced and has caught
// up with the Manager's writes that the read could see (the Cache's read
// barrier: readyourwrites.go).
type cachedReads[T any, PT Object[T]] struct {
	// client is the Client it serves, for its discovery check.
	client *Client[T]
	cache  *Cache
}

func (r cachedReads[T, PT]) get(
	ctx context.Context,
	namespace, name string,
) (*T, error) {
	inf, err := readInformer[T, PT](r.cache)
	if err != nil {
		return nil, err
	}
	c := &r.client.client
	return cachedGet(ctx, c, r.cache, &inf.informer, namespace, name)
}

func (r cachedReads[T, PT]) list(
	ctx context.Context,
	opts ListOptions,
) ([]*T, error) {
	inf, err := readInformer[T, PT](r.cache)
	if err != nil {
		return nil, err
	}
	c := &r.client.client
	return cachedList(ctx, c, r.cache, &inf.informer, opts)
}

// synced returns once inf, c's informer, has synced. A resource the
// server does not serve fails at once, after at most one discovery
// request (whose answer is cached, see discovery), rather than when ctx
// ends.
func synced[P any](
	ctx context.Context,
	c *client[P],
	inf *informer[P],
) error {
	err := c.checkServed(ctx, request{})
	if err == nil {
		err = inf.WaitForSync(ctx)
	}
	// Each names the resource.
	return err
}

// cachedGet is cachedReads.get over P = *T: a copy of the object
// namespace/name in inf, c's informer.
func cachedGet[P any](
	ctx context.Context,
	c *client[P],
	cache *Cache,
	inf *informer[P],
	namespace, name string,
) (P, error) {
	var none P
	err := synced(ctx, c, inf)
	if err == nil {
		err = cache.caughtUp(ctx, inf, namespace, name)
	}
	if err != nil {
		return none, err
	}
	obj, ok := inf.Get(namespace, name)
	if ok {
		return c.codec.ops.deepCopy(obj), nil
	}
	// matches apierrors.IsNotFound (internal/readmiss)
	key := nsKey(namespace, name)
	res := apitype.Resource(inf.res)
	return none, readmiss.NotFound(res, key, name)
}

// cachedList is cachedReads.list over P = *T: copies of the objects of
// inf, c's informer, that opts selects.
func cachedList[P any](
	ctx context.Context,
	c *client[P],
	cache *Cache,
	inf *informer[P],
	opts ListOptions,
) ([]P, error) {
	err := synced(ctx, c, inf)
	if err == nil {
		err = cache.caughtUp(ctx, inf, opts.Namespace, "")
	}
	if err != nil {
		return nil, err
	}
	items, err := inf.List(opts)
	if err != nil {
		return nil, err
	}
	out := make([]P, len(items))
	for i, obj := range items {
		out[i] = c.codec.ops.deepCopy(obj)
	}
	return out, nil
}
