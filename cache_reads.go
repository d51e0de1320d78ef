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
// barrier: readyourwrites.go). It is over P = *T, so that it is compiled
// once (see typeOps): ClientFor gives it T's informer.
type cachedReads[P any] struct {
	// client is the client it serves, for its discovery check.
	client *client[P]
	cache  *Cache
	// informer looks T's up on each read (readInformer), made on the first.
	informer func() (*informer[P], error)
}

// ready is T's informer once it has synced and has caught up with the
// writes a read of namespace/name ("" name: a List of namespace) could
// see. A resource the server does not serve fails at once, after at most
// one discovery request (whose answer is cached, see discovery), rather
// than when ctx ends. Each error names the resource.
func (r *cachedReads[P]) ready(
	ctx context.Context,
	namespace, name string,
) (*informer[P], error) {
	inf, err := r.informer()
	if err == nil {
		err = r.client.checkServed(ctx, request{})
	}
	if err == nil {
		err = inf.WaitForSync(ctx)
	}
	if err == nil {
		err = r.cache.caughtUp(ctx, inf, namespace, name)
	}
	return inf, err
}

// get is a copy of the object namespace/name in T's informer.
func (r *cachedReads[P]) get(
	ctx context.Context,
	namespace, name string,
) (P, error) {
	var none P
	inf, err := r.ready(ctx, namespace, name)
	if err != nil {
		return none, err
	}
	obj, ok := inf.Get(namespace, name)
	if ok {
		return r.client.codec.ops.deepCopy(obj), nil
	}
	// matches apierrors.IsNotFound (internal/readmiss)
	key := nsKey(namespace, name)
	res := apitype.Resource(inf.res)
	return none, readmiss.NotFound(res, key, name)
}

// list is copies of the objects of T's informer that opts selects.
func (r *cachedReads[P]) list(
	ctx context.Context,
	opts ListOptions,
) ([]P, error) {
	inf, err := r.ready(ctx, opts.Namespace, "")
	if err != nil {
		return nil, err
	}
	items, err := inf.List(opts)
	if err != nil {
		return nil, err
	}
	out := make([]P, len(items))
	for i, obj := range items {
		out[i] = r.client.codec.ops.deepCopy(obj)
	}
	return out, nil
}
