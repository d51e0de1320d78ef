package kctl

// Floor 2's last file: NewManager and NewCache, floor 1's Manager
// (newManager) and Cache (newCache) with the production behaviours that
// are on by default put on their points.

// NewManager loads the configuration (see LoadConfig), connects and makes
// the shared cache. It starts nothing: Start does.
//
// Its Manager is floor 1's (newManager, manager.go) with
//   - its metrics (manager_metrics.go): each request, informer and
//     reconcile is counted on the metrics page;
//   - read your writes (readyourwrites.go): one writeTracker hears of the
//     writes of its clients (writeNotes), holds back cached reads and
//     reconciles until the cache has them (the cache's read barrier), and
//     follows every whole informer the cache makes;
//   - the watch-list stream (watch_list.go): every informer syncs with
//     it, as NewCache's do.
//
// All three see each informer through the cache's made hook, before
// floor 1's own use of it (a shard member's, Manager.informerMade).
func NewManager(opts Options) (*Manager, error) {
	m, err := newManager(opts)
	if err != nil {
		return nil, err
	}
	m.countInMetrics()
	tracker := newWriteTracker()
	m.writes = tracker
	m.cache.barrier = tracker
	shardMade := m.cache.made
	m.cache.made = func(inf cachedInformer, meta bool) {
		m.countInformer(inf, meta)
		if !meta {
			tracker.track(inf)
		}
		streamByWatchList(inf)
		shardMade(inf, meta)
	}
	return m, nil
}

// NewCache returns a Cache reading through conn. It starts nothing.
//
// Its Cache is floor 1's (newCache, cache.go) whose informers sync with
// the watch-list stream (watch_list.go), through the made hook.
func NewCache(conn *Conn, opts CacheOptions) *Cache {
	c := newCache(conn, opts)
	c.made = func(inf cachedInformer, meta bool) {
		streamByWatchList(inf)
	}
	return c
}
