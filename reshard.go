package kctl

// Sharding's way to change what an informer holds: reshard ends every
// list and watch, so that each lists again with the shard selector then
// current (informer.shard, read by begin in apply.go).

// reshard makes every list/watch list again with the shard selector
// then current (see Informer.shard): it ends each one's request.
func (i *informer[P]) reshard() {
	i.mu.Lock()
	defer i.mu.Unlock()
	for _, w := range i.watches {
		w.reshard = true
		if w.cancel != nil {
			w.cancel()
		}
	}
}
