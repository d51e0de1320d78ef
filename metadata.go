package kctl

// An extra: metadata-only informers, the objects of a type held as their
// metadata (metav1.PartialObjectMetadata) only, and the controller sources
// that use them (OwnsMetadata, WatchesMetadata), for controllers that read
// no more of them, e.g. the children they own: their owner references and
// labels.

import (
	"fmt"
	"sync/atomic"

	"github.com/kctl-dev/kctl/internal/apitype"
	"github.com/kctl-dev/kctl/internal/objcodec"
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
// fraction of the Pod. Its scope and resync are T's (ScopeFor, ResyncFor),
// its objects leave out managedFields unless CacheOptions.KeepManagedFields,
// and TransformFor[T] does not apply. It is a cache of its own, apart from
// InformerFor[T]'s: the two may run side by side, each listing and
// watching. While T has only this one, a cached read of T (a ClientFor
// client's Get or List) is an error naming the fix, never an object with
// its metadata only.
func MetadataInformerFor[T any, PT Object[T]](
	c *Cache,
) (*Informer[metav1.PartialObjectMetadata], error) {
	r, declared, err := apitype.Of((*T)(nil))
	if err != nil {
		return nil, fmt.Errorf("kctl: cannot cache "+
			"metadata: %w", unprefixed(err))
	}
	return c.metadataInformer(Resource(r), !declared)
}

// metadataInformer is MetadataInformerFor of res, through the path of
// every informer (Cache.informer), under metadataKey(res); builtin: res
// is a k8s.io/api type's.
func (c *Cache) metadataInformer(
	res Resource,
	builtin bool,
) (*Informer[metav1.PartialObjectMetadata], error) {
	type meta = metav1.PartialObjectMetadata
	newInformer := func(scope Scope) cachedInformer {
		// With c.mu held: from now on a cached read of res is an error,
		// unless the cache holds res's objects whole too.
		c.types.SetPartial(res, cachedAsMetadata(res))
		cl := newMetadataClient(c.conn, res, builtin)
		// TransformFor[T]'s func(*T) is not one of *meta: not applied.
		inf := &Informer[meta]{}
		initInformer(&inf.informer, c, res, cl, scope)
		return inf
	}
	const read = false // a cached read of T never reads its metadata
	inf, err := c.informer(res, metadataKey(res), read, newInformer)
	if err != nil {
		return nil, err
	}
	return inf.(*Informer[meta]), nil
}

// metadataKey is the key of res's metadata informer among a Cache's
// informers: res with kind PartialObjectMetadata, which no resource has.
func metadataKey(res Resource) Resource {
	res.Kind = metadataKind
	return res
}

// isMetadata reports whether inf, an informer the Cache made, holds the
// metadata of its objects only (MetadataInformerFor).
func isMetadata(inf cachedInformer) bool {
	_, ok := inf.(*Informer[metav1.PartialObjectMetadata])
	return ok
}

// cachedAsMetadata is the error of a cached read of res, which the
// cache holds as metadata only (OwnsMetadata, WatchesMetadata).
func cachedAsMetadata(res Resource) error {
	return fmt.Errorf("kctl: a cached read of %s, which the cache "+
		"holds as metadata only (OwnsMetadata, WatchesMetadata, "+
		"MetadataInformerFor): read its metadata from "+
		"kctl.MetadataInformerFor, read whole objects with "+
		"Uncached(), or cache them whole (Owns, Watches, "+
		"InformerFor): %w", res, unprefixed(ErrNotCached))
}

// newMetadataClient is an uncached client of the metadata of res's
// objects, for reads only: the server sends them as
// metav1.PartialObjectMetadata, with apiVersion and kind those of res;
// builtin: res is a k8s.io/api type's.
func newMetadataClient(
	conn *Conn,
	res Resource,
	builtin bool,
) *client[*metav1.PartialObjectMetadata] {
	var err error
	if conn == nil {
		err = fmt.Errorf("kctl: a metadata client of %s "+
			"got a nil Conn", res)
	}
	return &client[*metav1.PartialObjectMetadata]{
		conn:     conn,
		res:      res,
		codec:    newMetadataCodec(res, builtin),
		err:      err,
		lastBody: new(atomic.Int64),
	}
}

// OwnsMetadata is Owns that caches only the metadata of C's objects (see
// MetadataInformerFor): a change to a C enqueues its controller owner of
// type T, found in the owner references of its metadata.
//
//	kctl.OwnsMetadata[corev1.Pod](c) // count Pods, find their owner: no spec, no status
//
// A Pod's metadata is about a tenth of the Pod, so a controller that reads
// no more of its children (their owner references, labels, annotations,
// finalizers) keeps a tenth of the memory. Read them from
// MetadataInformerFor[C](mgr.Cache()); a cached read of whole C objects
// (ClientFor[C]'s Get or List) is then an error, unless something else
// caches C whole (Owns, Watches, InformerFor). Use Owns when the reconcile
// reads the children's spec or status. Its predicates see
// *metav1.PartialObjectMetadata objects.
func OwnsMetadata[C any, PC Object[C], T any](
	c *Controller[T],
	preds ...Predicate,
) *Controller[T] {
	if c.keysOnly("OwnsMetadata") {
		return c
	}
	keys := func(obj *metav1.PartialObjectMetadata) []Key {
		return ownerKeys(c.res, obj)
	}
	return informerSource(c, MetadataInformerFor[C, PC], "owned", preds, keys)
}

// WatchesMetadata is Watches that caches only the metadata of O's objects
// (see MetadataInformerFor): a change to an O enqueues the keys mapFn
// returns from its metadata.
//
//	kctl.WatchesMetadata[corev1.Secret](c, byAnnotation) // no Secret data in memory
func WatchesMetadata[O any, PO Object[O], T any](
	c *Controller[T],
	mapFn func(obj *metav1.PartialObjectMetadata) []Key,
	preds ...Predicate,
) *Controller[T] {
	return informerSource(c, MetadataInformerFor[O, PO], "mapped", preds, mapFn)
}

// The codec of the metadata of a resource's objects alone, which the
// server sends as metav1.PartialObjectMetadata: the informers and Owns
// above read them so.

// metadataKind is the kind of an object's metadata sent alone.
const metadataKind = objcodec.MetadataKind

// newMetadataCodec is the codec of the metadata of res's objects, asked
// for in protobuf as metav1.PartialObjectMetadata (objcodec.Metadata);
// builtin: res is a k8s.io/api type's.
func newMetadataCodec(
	res Resource,
	builtin bool,
) codec[*metav1.PartialObjectMetadata] {
	type meta = metav1.PartialObjectMetadata
	return codec[*meta]{
		ops:        opsOf[meta](),
		res:        res,
		apiVersion: res.APIVersion(),
		builtin:    builtin,
		proto:      true,
		wire:       objcodec.Metadata(),
	}
}
