package kctl

// An extra (sharding): what a shard member needs of each informer of the
// Manager's cache, through the Informer fields the core declares for it
// (Informer.shard, reshard): set its selector, tell whether its store
// holds a list made with a selector, and which ranges its store still
// holds objects of. It adds no state to the informer.

import "github.com/kctl-dev/kctl/internal/shardhash"

// shardable is what sharding uses of an Informer[T] of any T.
type shardable interface {
	resource() Resource
	setShard(selector func() string)
	reshard()
	listedWith(selector string) bool
	heldRanges(n int) []bool
}

// setShard makes the informer list and watch with the shard selector
// that selector returns at each list and watch (Informer.shard). Call it
// before the informer runs: the Cache's made hook, or before Start.
func (i *Informer[T]) setShard(selector func() string) {
	i.shard = selector
}

// heldRanges reports, for each of n ranges, whether the store holds an
// object whose namespace (for a namespaced resource) falls in it by
// shardhash.Bucket: a range a member drains is dropped once it is false.
// It reads every stored object: O(objects), for the looks of a drain.
func (i *Informer[T]) heldRanges(n int) []bool {
	held := make([]bool, n)
	objs, _ := i.List(ListOptions{}) // no selector: no error
	for _, obj := range objs {
		ns := metaOf(obj).GetNamespace()
		held[shardhash.Bucket(ns, n)] = true
	}
	return held
}

// listedWith reports whether the store holds, for every namespace in
// scope, a list made with selector (the objects of the held ranges),
// followed by its watch: a range may be served once every informer
// has listed with a selector that takes it in.
func (i *Informer[T]) listedWith(selector string) bool {
	i.mu.RLock()
	defer i.mu.RUnlock()
	for _, w := range i.watches {
		if !w.synced || w.listed != selector {
			return false
		}
	}
	return true
}
