package kctl

// Floor 3, for sharding: what a shard member (shard_state.go) asks of
// each of its Manager's controllers (shardedController): is a key of a
// range in flight, and a replay of the cached keys of the ranges it
// gained. Floor 1 calls neither.

// shardedController is what a shard member asks of a controller of any
// T, found in the Manager's list of them (Manager.byName).
type shardedController interface {
	inFlight(match func(k Key) bool) bool
	replayKeys(match func(Key) bool)
}

// inFlight reports whether a key that match accepts is being
// reconciled now. A worker that took a key before the owner hook
// (keyOwner.owns) stopped owning it is in active already: so once
// the hook says no and inFlight is false, no reconcile of such a key
// runs until the hook says yes again.
func (c *controller[P]) inFlight(match func(k Key) bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.active {
		if match(k) {
			return true
		}
	}
	return false
}

// replayKeys queues again, at low priority, the cached keys that match
// takes, while the controller runs: a sharded replica that starts
// owning more keys (match: those of the ranges it gained) reconciles
// those already in its cache, not every key it holds.
func (c *controller[P]) replayKeys(match func(Key) bool) {
	c.mu.Lock()
	running := c.queue != nil
	c.mu.Unlock()
	if !running {
		return // the next run replays everything
	}
	for _, replay := range c.replays {
		replay(match)
	}
}
