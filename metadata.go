package kctl

// Metadata-only informers: the objects of a type held as their metadata
// (metav1.PartialObjectMetadata) only, for controllers that read no more
// of them, e.g. the children they own: their owner references and labels.

import (
	"fmt"
	"slices"

	"github.com/kctl-dev/kctl/internal/share"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MetadataInformerFor returns the informer of the metadata of T's objects,
// making it on first use; it runs once c is started.
//
//	pods, err := kctl.MetadataInformerFor[corev1.Pod](cache)
//	p, ok := pods.Get("shop", "web-0") // p.OwnerReferences, p.Labels; no spec
//
// The server sends the objects as metav1.PartialObjectMetadata (in
// protobuf, for declared types too), with apiVersion and kind those of T,
// so the cache holds and decodes no spec or status: a Pod's metadata is a
// fraction of the Pod. Its scope is T's (ScopeFor), its objects leave out
// managedFields unless CacheOptions.KeepManagedFields, and TransformFor[T]
// does not apply. It is a cache of its own, apart from InformerFor[T]'s:
// the two may run side by side, each listing and watching.
func MetadataInformerFor[T any, PT Object[T]](
	c *Cache,
) (*Informer[metav1.PartialObjectMetadata], error) {
	res, err := ResourceOf[T]()
	if err != nil {
		return nil, fmt.Errorf("kctl: cannot cache "+
			"metadata: %w", unprefixed(err))
	}
	key := metadataKey(res)
	c.mu.Lock()
	defer c.mu.Unlock()
	type meta = metav1.PartialObjectMetadata
	if inf, ok := c.informers[key]; ok {
		return inf.(*Informer[meta]), nil
	}
	if c.stopped {
		return nil, fmt.Errorf("kctl: cannot cache the metadata "+
			"of %s: the cache is stopped", res)
	}
	scope, scoped := c.scopes[res]
	if !scoped {
		scope = c.opts.DefaultScope
	}
	keep := c.opts.KeepManagedFields
	prepare := func(obj *meta) {
		if !keep {
			obj.SetManagedFields(nil)
		}
	}
	inf := &Informer[meta]{
		res:       res,
		name:      res.String(),
		client:    newMetadataClient[T](c.conn),
		resync:    c.opts.Resync,
		healthy:   healthyWatch,
		log:       c.opts.Logger,
		store:     newStore[meta](),
		sharer:    share.New((*meta)(nil)),
		transform: prepare,
	}
	inf.client.codec.skipManagedFields = !keep
	inf.watches = scopeWatches(res, scope)
	c.informers[key] = inf
	ctx := c.ctx
	if ctx != nil {
		c.wg.Go(func() { inf.run(ctx) })
	}
	return inf, nil
}

// metadataKey is the key of res's metadata informer among a Cache's
// informers: res with kind PartialObjectMetadata, which no resource has.
func metadataKey(res Resource) Resource {
	res.Kind = metadataKind
	return res
}

// scopeWatches is a list/watch per namespace of scope, or one for all.
func scopeWatches(res Resource, scope Scope) []*watchState {
	sorted := slices.Sorted(slices.Values(scope.Namespaces))
	namespaces := slices.Compact(sorted)
	all := !res.Namespaced ||
		len(namespaces) == 0 ||
		slices.Contains(namespaces, "")
	if all {
		namespaces = []string{""}
	}
	var watches []*watchState
	for _, ns := range namespaces {
		opts := ListOptions{
			Namespace: ns,
			Labels:    scope.Labels,
			Fields:    scope.Fields,
		}
		watches = append(watches, &watchState{opts: opts})
	}
	return watches
}
