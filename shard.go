package kctl

// An extra (sharding): ShardOptions, what a replica of a sharded group is,
// and the design; what a shard member needs of each informer of the
// Manager's cache, through the informer field the core declares for it
// (informer.shard, the selector begin reads) and watchState.reshard: set
// its selector and list again with it, tell whether its store holds a
// list made with a selector, and which ranges its store still holds
// objects of (it adds no state to the informer); and the probe:
// does the server serve ListOptions.ShardSelector? Membership is in
// shard_members.go, the member's state and handovers in shard_state.go,
// its run loop in shard_run.go, Manager.Shard in shard_manager.go.
//
// # Design: what is assigned, and how
//
// The unit of work is a range: one of ShardOptions.Ranges buckets. A
// namespaced object belongs to the range of its NAMESPACE,
// shardhash.Bucket(namespace, Ranges) (FNV-1a 64 of the name, mixed, mod
// Ranges), so that a controller's objects and what it owns or reads in the
// same namespace (podcount: a ReplicaSet and its Pods) land on one replica.
// A cluster-scoped object belongs to the range of its NAME, the same way.
// The ranges are assigned to the live members (their Leases) with
// shardhash.AssignWeighted, rendezvous hashing with loads bounded by
// WEIGHT: a range weighs the number of namespaces in it, which every
// member counts from its Namespace informer. Pairs (range, member) are
// taken from the highest score down, a range going to the first member
// it fits under the cap ⌈namespaces/N⌉; what fits nowhere goes, heaviest
// first, to the least loaded. So each member holds the mean number of
// namespaces to within one range's weight by construction (internal/
// shardhash's tests: 300 realistic names over 3 members, 64 ranges: at
// worst 5 % off the mean over 50 groups of random pod names; over 5
// members 10 %; 3,000 names 4-6 %; 256 ranges halve those). A member
// joining moves 27-30 % of the namespaces going from 3 to 4 (ideal 25 %),
// 20-24 % from 5 to 6 (ideal 17 %); a namespace created moves 1 % of the
// others on average (up to 12 % when the cap steps up), each move a
// handover and a relist. Members may disagree on the weights for a
// moment (their informers see a namespace at different times): the
// handover rule below does not depend on the owners agreeing, so no
// range is served by two, and once the informers agree the owners do
// (internal/handover's simulation changes the weights under the
// members). Ranges with no namespace go to their top-scoring member:
// the names of cluster-scoped objects, which weigh nothing, split about
// evenly, not within 10 %. A range changes hands only through
// internal/handover: the old owner stops taking its keys, waits for its
// in-flight reconciles, drops its objects, records the release in its
// Lease; the new owner claims it, a look later lists its objects, and
// takes its keys once every sharded informer has listed them (so that no
// reconcile reads a cache of another type, a ReplicaSet's Pods, that
// does not hold the range yet).
//
// Each replica's informers of namespaced types list and watch with a
// server-side shard selector naming the EXACT hash points of the
// namespaces in its ranges, shardRange(object.metadata.namespace, h, h+1)
// per namespace (shardhash.Selector), so its cache holds its share. That
// needs the namespaces' names: a metadata-only informer of Namespaces
// (RBAC: list and watch namespaces).
//
// Why not equal ranges of the server's own namespace hash: FNV-1a hardly
// moves its top bits with a name's last characters, so 300 namespaces
// named tenant-0000..tenant-0299 fell in 2 of 8 equal ranges
// (internal/shardhash's balance tests). Why not uid ranges for namespaced
// objects: a ReplicaSet and its Pods would land on different replicas,
// and a controller's cached reads of its children would miss.
//
// What it costs:
//   - a namespace that appears in a replica's ranges changes its selector:
//     each sharded informer lists its share again (a relist, not a watch
//     event); so does every range that moves;
//   - the selector grows about 85 bytes per namespace held (300 points
//     were measured accepted, 25 KB); a replica of 1,000 namespaces of
//     3 sends about 28 KB per list and watch;
//   - the balance is that of ALL the cluster's namespaces, not of the
//     objects: one huge namespace stays on one replica, namespaces
//     without the controller's objects count as much as the others (in
//     the whole test suite, where other tests' empty namespaces abound,
//     600 ReplicaSets in 300 namespaces split 188 to 222), and a range's
//     weight is the grain
//     (30 namespaces over 3 members with 64 ranges: 8 to 12 each); more
//     ranges give a finer grain (Ranges 256 halves the deviation) for a
//     longer Lease annotation (the ranges a member records, about 4
//     bytes each: 1.5 KB at 1024 over 3) and n·N scores per look;
//   - a key from Enqueue or a channel source is reconciled only on the
//     replica that owns its range (the others skip it: the skipped-keys
//     series), and a handover replays only the cached keys of the
//     ranges gained: feed such keys to every replica, and again after a
//     handover if they have no cached object;
//   - cluster-scoped types are not split in memory: every replica caches
//     them whole, and reconciles only the names in its ranges (the
//     server's selector hashes only uids or namespaces, and a key, which
//     is what a worker decides on, has no uid);
//   - where the server does not serve ShardSelector (the feature gate
//     ShardedListAndWatch off, or before 1.36; Shard probes it), every
//     cache holds everything and only the reconciles are split: "memory
//     not split" in the log and on /readyz;
//   - cached reads see only the replica's namespaces: a reconcile that
//     reads another namespace's objects must read them Uncached, and
//     read-your-writes covers only the namespaces of the ranges the
//     replica serves (readyourwrites.go).

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/kctl-dev/kctl/internal/shardhash"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ShardGroupLabel labels the Leases of a shard group with the group's name:
// each member holds one, named <group>-<identity>.
const ShardGroupLabel = "kctl.dev/shard-group"

// ShardOptions describe one replica of a group of replicas running the same
// program and sharing its work, each holding a Lease of its own:
//
//	opts := kctl.ShardOptions{Group: "podcount", Namespace: "podcount-system"}
//
// The live members of the group are the Leases labelled
// ShardGroupLabel=<Group> in Namespace that this replica has seen renewed
// within their duration, by its own monotonic clock (no other machine's
// timestamps), as LeaderElection judges a leader. The namespaces (and
// the names of cluster-scoped objects) fall in Ranges buckets, assigned
// to the members (see the design above; Manager.Shard uses it).
//
// Only Group is required; the other fields have defaults. The replica needs
// get, list, create, update and delete on leases.coordination.k8s.io in
// Namespace, and list and watch on namespaces.
type ShardOptions struct {
	// the group's name: a label value, and the prefix of its Leases' names
	Group string
	// the Leases' namespace; defaults to the pod's own (set it outside a
	// cluster)
	Namespace string
	// this replica's name in the group, unique in it; defaults to
	// <hostname>-<random> (a StatefulSet's pod name keeps its Lease across
	// restarts)
	Identity string
	// how many ranges the hash space is cut into; defaults to 64, at most
	// 1024. Every member of a group must use the same.
	Ranges int
	// how long a Lease stays live unrenewed; defaults to 15s
	LeaseDuration time.Duration
	// how long a member tries to renew before it stops all its work;
	// defaults to 10s, < LeaseDuration
	RenewDeadline time.Duration
	// the interval of renewals and of looks at the group (with three
	// lists of the group between, and a look when a peer's Lease
	// expires); defaults to 2s, 1.2× < RenewDeadline
	RenewPeriod time.Duration
}

// complete returns o with its defaults filled in, or an error naming the
// field to fix.
func (o ShardOptions) complete() (ShardOptions, error) {
	if o.Group == "" {
		return o, errors.New("kctl: sharding: ShardOptions.Group is " +
			"empty: name the group, e.g. after the controller")
	}
	if o.Namespace == "" {
		b, err := os.ReadFile(namespaceFile)
		o.Namespace = strings.TrimSpace(string(b))
		if o.Namespace == "" {
			return o, fmt.Errorf("kctl: sharding: set "+
				"ShardOptions.Namespace for group %q: "+
				"not running in a cluster (%v)", o.Group, err)
		}
	}
	if o.Identity == "" {
		host, _ := os.Hostname()
		suffix := strings.ToLower(rand.Text()[:8])
		host = strings.ToLower(host)
		o.Identity = cmp.Or(host, "kctl") + "-" + suffix
	}
	o.Ranges = cmp.Or(o.Ranges, 64)
	o.LeaseDuration = cmp.Or(o.LeaseDuration, 15*time.Second)
	o.RenewDeadline = cmp.Or(o.RenewDeadline, 10*time.Second)
	o.RenewPeriod = cmp.Or(o.RenewPeriod, 2*time.Second)
	err := o.check()
	return o, err
}

// check validates a completed o.
func (o ShardOptions) check() error {
	bad := validation.IsValidLabelValue(o.Group)
	if len(bad) > 0 {
		return fmt.Errorf("kctl: sharding: ShardOptions.Group %q "+
			"is not a label value: %s", o.Group, bad[0])
	}
	bad = validation.IsDNS1123Subdomain(o.leaseName())
	if len(bad) > 0 {
		return fmt.Errorf("kctl: sharding: the Lease name %q "+
			"(<Group>-<Identity>) is not a valid name: %s; "+
			"choose a lowercase Group and Identity",
			o.leaseName(), bad[0])
	}
	if o.Ranges < 1 || o.Ranges > 1024 {
		return fmt.Errorf("kctl: sharding: group %q: "+
			"ShardOptions.Ranges is %d; give 1 to 1024",
			o.Group, o.Ranges)
	}
	negative := o.RenewPeriod < 0
	tooShort := o.LeaseDuration < time.Second
	leaseOK := o.LeaseDuration > o.RenewDeadline
	renewOK := o.RenewDeadline > o.RenewPeriod*6/5
	if negative || tooShort || !leaseOK || !renewOK {
		return fmt.Errorf("kctl: sharding: group %q: "+
			"LeaseDuration (%v) must be greater than "+
			"RenewDeadline (%v), RenewDeadline must be greater "+
			"than 1.2 × RenewPeriod (%v), durations must be "+
			"positive and LeaseDuration at least 1s",
			o.Group, o.LeaseDuration, o.RenewDeadline,
			o.RenewPeriod)
	}
	return nil
}

// leaseName is the name of this member's Lease.
func (o ShardOptions) leaseName() string {
	return o.Group + "-" + o.Identity
}

// shardable is what sharding uses of an Informer[T] of any T.
type shardable interface {
	resource() Resource
	setShard(selector string)
	reshard()
	listedWith(selector string) bool
	heldRanges(n int) []bool
}

// setShard makes the informer list and watch with selector from its
// next list or watch on (informer.shard, read by begin), from its first
// list if it does not run yet. It ends no list or watch: after a change,
// reshard makes each list again with it.
func (i *informer[P]) setShard(selector string) {
	i.mu.Lock()
	defer i.mu.Unlock()
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

// shardProbeTimeout bounds one probe of the shard selector.
const shardProbeTimeout = 10 * time.Second

// probeShardSelector asks the server, with one list of at most one object
// of res in every namespace, whether it honours a shard selector on res:
// it sends the selector of the whole hash space, which selects everything,
// and reports true if and only if the answer echoes it in
// metadata.shardInfo. kube-apiserver 1.36 does with the feature gate
// ShardedListAndWatch on; without the gate, or before 1.36, the server
// ignores the parameter and lists, and the answer is false. An aggregated
// API or another server may differ, hence one probe per resource.
//
// It never sends an invalid selector: kube-apiserver 1.36.3 answers one
// with 500, which would read as a failing server. It takes at most
// shardProbeTimeout; an error (the server's answer, a 403 naming the
// missing list permission) means it could not tell.
func probeShardSelector(
	ctx context.Context,
	conn *Conn,
	res Resource,
) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, shardProbeTimeout)
	defer cancel()
	sel := shardhash.Selector(shardhash.FieldUID, shardhash.Range{})
	q := url.Values{}
	q.Set("limit", "1")
	q.Set("shardSelector", sel)
	r := request{
		verb:   "probe the shard selector on",
		method: http.MethodGet,
		list:   true,
		query:  q,
		path:   listPath(res),
		accept: "application/json",
	}
	resp, err := conn.do(ctx, r)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return false, fmt.Errorf("kctl: probe the shard selector "+
			"on %s: reading the answer: %w", res, err)
	}
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("kctl: probe the shard selector "+
			"on %s: the server answered %s: %s (the replica "+
			"needs list on %s in every namespace)",
			res, resp.Status, body, res.Plural)
	}
	var list struct {
		Metadata struct {
			ShardInfo *struct {
				Selector string `json:"selector"`
			} `json:"shardInfo"`
		} `json:"metadata"`
	}
	err = json.Unmarshal(body, &list)
	if err != nil {
		return false, fmt.Errorf("kctl: probe the shard selector "+
			"on %s: decoding the answer: %w", res, err)
	}
	info := list.Metadata.ShardInfo
	return info != nil && info.Selector == sel, nil
}

// listPath is the path of a list of res in every namespace.
func listPath(res Resource) string {
	p := "/api/" + res.Version
	if res.Group != "" {
		p = "/apis/" + res.Group + "/" + res.Version
	}
	return p + "/" + res.Plural
}

// Sharding's way to change what an informer holds: after setShard,
// reshard ends every list and watch, so that each lists again with the
// shard selector then set (informer.shard, read by begin in apply.go).

// reshard makes every list/watch list again with the shard selector
// then set (see setShard): it ends each one's request.
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
