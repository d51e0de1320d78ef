package kctl

// An extra (sharding): the members of a shard group, one Lease each.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/kctl-dev/kctl/internal/handover"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// shardRangesAnnotation on a member's Lease records the ranges it claims,
// serves or drains (internal/handover), as comma-separated indexes of the
// group's ranges, e.g. "0,5,17"; "" or absent: none. A peer takes none of
// them while the Lease is live.
const shardRangesAnnotation = "kctl.dev/shard-ranges"

// errShardLeaseLost: this member's Lease was deleted or taken while it
// held it (a peer judged it expired): the member must stop all its work at
// once, as a leader that lost its lease does.
var errShardLeaseLost = errors.New("kctl: sharding: this member's " +
	"Lease was deleted or changed by another process")

// memberStore reads and writes the group's Leases, updating obj from the
// answer; *Client[coordinationv1.Lease] is one.
type memberStore interface {
	Get(ctx context.Context, namespace, name string) (*coordinationv1.Lease, error)
	List(ctx context.Context, opts ListOptions) ([]*coordinationv1.Lease, error)
	Create(ctx context.Context, obj *coordinationv1.Lease) error
	Update(ctx context.Context, obj *coordinationv1.Lease) error
	DeleteWithOptions(ctx context.Context, namespace, name string, opts DeleteOptions) error
}

// shardMembers is one member's view of its group: its own Lease and what
// it saw of the others. One goroutine owns it; it is not safe for
// concurrent use.
//
// Invariants: own is nil before join and after leave, else the Lease as
// last written. seen holds, for each Lease of the group listed last time,
// its resourceVersion and the local time at which this member first saw
// that version (internal/handover's Sightings); a Lease is live while
// now - that time < its duration.
type shardMembers struct {
	cfg   ShardOptions // completed
	store memberStore
	now   func() time.Time // time.Now; a fake clock in tests
	own   *coordinationv1.Lease
	seen  handover.Sightings
}

// newShardMembers makes the view of a member; cfg must be completed.
func newShardMembers(cfg ShardOptions, store memberStore) *shardMembers {
	return &shardMembers{
		cfg:   cfg,
		store: store,
		now:   time.Now,
	}
}

// join creates this member's Lease, or takes it over if this identity left
// one behind (a restarted StatefulSet pod): a member is one identity.
func (m *shardMembers) join(ctx context.Context) error {
	now := metav1.NewMicroTime(m.now())
	name := m.cfg.leaseName()
	old, err := m.store.Get(ctx, m.cfg.Namespace, name)
	notFound := apierrors.IsNotFound(err)
	if err != nil && !notFound {
		return m.failed("read", err)
	}
	l := &coordinationv1.Lease{}
	if !notFound {
		l = old
	}
	l.Name = name
	l.Namespace = m.cfg.Namespace
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels[ShardGroupLabel] = m.cfg.Group
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	// a new member holds nothing, whatever its last life recorded
	l.Annotations[shardRangesAnnotation] = ""
	secs := int32(m.cfg.LeaseDuration / time.Second)
	l.Spec.HolderIdentity = new(m.cfg.Identity)
	l.Spec.LeaseDurationSeconds = new(secs)
	l.Spec.AcquireTime = &now
	l.Spec.RenewTime = &now
	if notFound {
		err = m.store.Create(ctx, l)
	} else {
		err = m.store.Update(ctx, l)
	}
	if err != nil {
		return m.failed("create", err)
	}
	m.own = l
	return nil
}

// renew writes a new renewTime on this member's Lease, and the ranges it
// now records (see shardRangesAnnotation), over the version it last wrote.
// errShardLeaseLost if another process deleted or changed it.
func (m *shardMembers) renew(ctx context.Context, recorded []int) error {
	if m.own == nil {
		return errors.New("kctl: sharding: renew before join")
	}
	l := m.own.DeepCopy()
	now := metav1.NewMicroTime(m.now())
	l.Spec.RenewTime = &now
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[shardRangesAnnotation] = handover.Format(recorded)
	err := m.store.Update(ctx, l)
	gone := apierrors.IsNotFound(err)
	taken := apierrors.IsConflict(err)
	if gone || taken {
		m.own = nil
		return fmt.Errorf("%w: %w", errShardLeaseLost, err)
	}
	if err != nil {
		return m.failed("renew", err)
	}
	m.own = l
	return nil
}

// leave deletes this member's Lease, if it is still the one it wrote:
// the others see the member gone at their next look, without waiting for
// it to expire.
func (m *shardMembers) leave(ctx context.Context) error {
	if m.own == nil {
		return nil
	}
	opts := DeleteOptions{UID: m.own.UID}
	err := m.store.DeleteWithOptions(
		ctx, m.own.Namespace, m.own.Name, opts)
	m.own = nil
	if err != nil && !apierrors.IsNotFound(err) {
		return m.failed("delete", err)
	}
	return nil
}

// shardView is one look at the group.
type shardView struct {
	// members is the identities of the live members, sorted
	members []string
	// taken[r] tells whether another live member records range r
	taken []bool
}

// live lists the group's Leases and returns the live members: this
// member's own while it holds its Lease, and every other whose Lease it has
// seen change within the Lease's duration; and the ranges the others
// record. A Lease it judges expired is deleted, guarded by its
// resourceVersion (a renewal in between wins), so the group does not
// collect the Leases of dead replicas; its records no longer count.
func (m *shardMembers) live(ctx context.Context) (shardView, error) {
	sel := labels.SelectorFromSet(labels.Set{
		ShardGroupLabel: m.cfg.Group,
	})
	list, err := m.store.List(ctx, ListOptions{
		Namespace: m.cfg.Namespace,
		Labels:    sel,
	})
	if err != nil {
		return shardView{}, m.failed("list", err)
	}
	now := m.now()
	seen := make(map[string]handover.Seen, len(list))
	view := shardView{taken: make([]bool, m.cfg.Ranges)}
	var expired []*coordinationv1.Lease
	for _, l := range list {
		s := m.observe(l, now)
		seen[l.Name] = s
		switch {
		case s.Identity == "":
			// released: not a member
		case m.own != nil && l.Name == m.own.Name:
			view.members = append(view.members, m.cfg.Identity)
		case s.Live(now):
			view.members = append(view.members, s.Identity)
			record := l.Annotations[shardRangesAnnotation]
			handover.MarkTaken(view.taken, record)
		default:
			expired = append(expired, l)
		}
	}
	m.seen.Listed(seen, now)
	joined := m.own != nil
	if joined && !slices.Contains(view.members, m.cfg.Identity) {
		// our Lease is not listed: deleted by a peer
		m.own = nil
		return shardView{}, errShardLeaseLost
	}
	for _, l := range expired {
		m.forget(ctx, l)
	}
	slices.Sort(view.members)
	view.members = slices.Compact(view.members)
	return view, nil
}

// nextExpiry is when the first Lease of another member that was live at
// the last list expires by what this member saw (zero if none), perhaps
// already past: a look then judges it expired at once, not up to a
// RenewPeriod later.
func (m *shardMembers) nextExpiry() time.Time {
	own := ""
	if m.own != nil {
		own = m.own.Name
	}
	return m.seen.NextExpiry(own)
}

// observe returns what this member knows of l at now: when it first saw
// l's current version.
func (m *shardMembers) observe(
	l *coordinationv1.Lease,
	now time.Time,
) handover.Seen {
	s := handover.Seen{
		ResourceVersion: l.ResourceVersion,
		At:              now,
		Duration:        m.cfg.LeaseDuration,
	}
	if l.Spec.HolderIdentity != nil {
		s.Identity = *l.Spec.HolderIdentity
	}
	secs := l.Spec.LeaseDurationSeconds
	if secs != nil && *secs > 0 {
		s.Duration = time.Duration(*secs) * time.Second
	}
	return m.seen.Observe(l.Name, s)
}

// forget deletes the expired Lease l unless it changed since it was
// listed. Errors are ignored: another member may have deleted it first,
// and the next look tries again.
func (m *shardMembers) forget(
	ctx context.Context,
	l *coordinationv1.Lease,
) {
	opts := DeleteOptions{
		UID:             l.UID,
		ResourceVersion: l.ResourceVersion,
	}
	_ = m.store.DeleteWithOptions(ctx, l.Namespace, l.Name, opts)
}

// failed wraps err from verb on the group's Leases, naming the permission
// when it is Forbidden.
func (m *shardMembers) failed(verb string, err error) error {
	where := m.cfg.Namespace + "/" + m.cfg.leaseName()
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("kctl: sharding: %s Lease %s: %w (the "+
			"replica needs get, list, create, update and delete "+
			"on leases.coordination.k8s.io in namespace %s)",
			verb, where, err, m.cfg.Namespace)
	}
	return fmt.Errorf("kctl: sharding: %s Lease %s: %w",
		verb, where, err)
}
