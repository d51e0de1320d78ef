package kctl

// An extra (sharding): Manager.Shard, which makes a Manager a member of a
// shard group: its Lease, the group's leader election, the points the
// core declares that it fills (the Manager's member, the cache's made
// hook) and the member's run.

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
)

// Shard makes this Manager one member of the shard group opts.Group: the
// replicas running the same program share its controllers' work and
// cache, each reconciling and caching the objects of its ranges (see the
// design above and ShardOptions):
//
//	err := mgr.Shard(kctl.ShardOptions{Group: "podcount", Namespace: "podcount-system"})
//
// Controllers and clients do not change: every controller runs on every
// member, over the keys of the member's ranges; a key is never
// reconciled by two members at once, as a range moves only once its old
// owner has drained it. Runnables that need a leader (Runnable.NeedLeader)
// run on one member, the group's leader, elected on the Lease
// <Group>-leader in opts.Namespace (as ElectLeader does). A member that
// cannot renew its Lease for RenewDeadline stops all its work and Start
// returns an error matching ErrLeaderLost; on a graceful stop it drains
// and deletes its Lease, so its peers take its ranges at once. /readyz
// shows "shard" with the group, the members, the ranges served and how
// the caches are split; the metrics page kctl_shard_members,
// kctl_shard_ranges_owned and kctl_shard_handovers_total.
//
// Call it at most once, before Start; it excludes ElectLeader. Besides
// the Leases (get, list, create, update, delete), a member needs list and
// watch on namespaces, and list on each cached type in every namespace.
func (m *Manager) Shard(opts ShardOptions) error {
	_, err := m.shard(opts)
	return err
}

// shardLeases is what a member reads and writes its group's Leases
// and its leader Lease with; *Client[coordinationv1.Lease] is one.
type shardLeases interface {
	memberStore
	leaseStore
}

// shard is Shard returning the member it made (for tests).
func (m *Manager) shard(opts ShardOptions) (*shardRun, error) {
	conn, err := m.leaseConn()
	if err != nil {
		return nil, err
	}
	leases := NewClient[coordinationv1.Lease](conn)
	return m.shardWith(opts, leases)
}

// shardWith is shard keeping the Leases in leases (a faulty one in tests).
func (m *Manager) shardWith(opts ShardOptions, leases shardLeases) (*shardRun, error) {
	cfg, err := opts.complete()
	if err != nil {
		return nil, err
	}
	if cfg.Identity == "leader" {
		return nil, fmt.Errorf("kctl: sharding: group %q: the Identity "+
			"\"leader\" is taken by the group's leader Lease "+
			"(%s-leader); choose another", cfg.Group, cfg.Group)
	}
	m.mu.Lock()
	by := m.electBy
	started := m.started
	m.mu.Unlock()
	if started {
		return nil, fmt.Errorf("kctl: Shard(%q) after Start: "+
			"call it before Start", cfg.Group)
	}
	if by != "" {
		return nil, fmt.Errorf("kctl: Shard(%q) after %s: a Manager "+
			"either shards (its group elects its own leader) or "+
			"elects a leader (ElectLeader); call one of them",
			cfg.Group, by)
	}
	le := LeaderElection{
		Name:          cfg.Group + "-leader",
		Namespace:     cfg.Namespace,
		Identity:      cfg.Identity,
		LeaseDuration: cfg.LeaseDuration,
		RenewDeadline: cfg.RenewDeadline,
		RetryPeriod:   cfg.RenewPeriod,
		Recampaign:    true, // a member lives on without leading
	}
	err = m.electLeader(le, leases, "Shard")
	if err != nil {
		return nil, err
	}
	s := newShardRun(m, cfg, leases)
	nss, err := MetadataInformerFor[corev1.Namespace](m.cache)
	if err != nil {
		return nil, fmt.Errorf("kctl: sharding: %w", unprefixed(err))
	}
	s.namespaces = nss
	nss.AddHandler(s.namespaceChanged)
	// Every informer made so far, and every one the cache makes from now
	// on (its made hook, wrapped), lists and watches the member's share.
	m.cache.mu.Lock()
	made := m.cache.made
	m.cache.made = func(inf cachedInformer) {
		made(inf)
		s.informerMade(inf)
	}
	for _, inf := range m.cache.informers {
		s.informerMade(inf)
	}
	m.cache.mu.Unlock()
	s.lost, s.loseWork = context.WithCancelCause(context.Background())
	m.mu.Lock()
	m.member = s
	m.mu.Unlock()
	m.health.AddNoted("shard", true, s.notReady, s.note)
	err = m.Add(Runnable{Name: "shard member", Run: s.run})
	return s, err
}
