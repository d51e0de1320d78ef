package kctl

// The Manager as its controllers' host: NewController sets a controller
// up (its defaults, its own informer, the hooks of controllerHost) and
// register adds it under a unique name, as a runnable of the leader work
// or of every replica.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kctl-dev/kctl/internal/ctrlnames"
)

// NewController makes a controller named name that calls reconcile for every
// object of type T that changes, and for every key other sources enqueue.
// T is inferred from reconcile:
//
//	c := kctl.NewController(mgr, "podcount", func(ctx context.Context, rs *appsv1.ReplicaSet) (kctl.Result, error) { ... })
func NewController[T any, PT Object[T]](
	m *Manager,
	name string,
	reconcile func(ctx context.Context, obj *T) (Result, error),
) *Controller[T] {
	c := &Controller[T]{}
	c.setUp(m, name)
	c.reconcile = func(ctx context.Context, _ Key, obj *T) (Result, error) {
		if obj == nil { // not cached: gone, or not made yet
			return Result{}, nil
		}
		return reconcile(ctx, obj)
	}
	c.client = &NewClient[T, PT](m.conn).client
	c.ops = c.client.codec.ops
	res, err := ResourceOf[T]()
	var informer *Informer[T]
	if err == nil {
		c.res = res
		informer, err = InformerFor[T, PT](m.cache)
	}
	if err != nil {
		m.misuse(fmt.Errorf("kctl: controller %q: %w", name, unprefixed(err)))
		return c
	}
	c.watchOwn(&informer.informer, m.writes)
	m.register(&c.controller, name, res.Kind+", made at "+ctrlnames.Caller())
	return c
}

// setUp makes the parts of a new controller, named name, that do not
// depend on what it reconciles: its defaults, and its host m.
func (c *controller[P]) setUp(m *Manager, name string) {
	c.name = name
	c.workers = 1
	c.log = m.log.With("controller", name)
	c.active = map[Key]time.Time{}
	c.synced = make(chan struct{})
	c.host = m
	c.lowIf = lowByDefault
	c.chain = []middleware[P]{{name: "read", rank: rankRead, wrap: c.read}}
}

// watchOwn makes the changes of inf, the informer of the controller's own
// objects (of c.res), enqueue their keys, and has the finalizer writes of
// its client recorded by writes (read-your-writes).
func (c *controller[P]) watchOwn(inf *informer[P], writes writeNotes) {
	c.informer = inf
	connect := func() { c.informer.addHandler(live(c.onEvent)) }
	c.connects = append(c.connects, connect)
	c.caches = append(c.caches, c.informer)
	c.client.notes = writes
	c.replays = append(c.replays, replay(c.informer, ownKeys[P], c.onEvent))
}

// observer implements controllerHost: the observers hook's observer
// of a run of controller name.
func (m *Manager) observer(name string, workers int) controllerObserver {
	m.mu.Lock()
	obs := m.observers
	m.mu.Unlock()
	return obs.observer(name, workers)
}

// owner implements controllerHost: the shard member, if Shard set one.
// Read without m.mu: Shard sets member before Start, and it is fixed from
// Start on, so every reconcile reads it without a lock.
func (m *Manager) owner() keyOwner { return m.member }

// drainBy implements controllerHost: the shutdown schedule's DrainBy.
func (m *Manager) drainBy() (time.Time, time.Duration) {
	return m.schedule.DrainBy(), m.opts.ShutdownTimeout
}

// register adds controller c, named name, to the Manager, unless the
// name is taken; made says what made it, for that error.
func (m *Manager) register(
	c namedController,
	name string,
	made string,
) {
	// Two runnables: which one runs the controller is fixed when its
	// caches have synced (NeedLeader); the other then returns. The one
	// of every replica waits for the caches, the leader's for it.
	runnable := Runnable{
		Name:       "controller " + name,
		NeedLeader: true,
		runTerm:    c.runLed,
		Busy:       c.busy,
	}
	// Run is what runTerm does outside a term, whose lease never ends.
	runnable.Run = func(ctx context.Context) error {
		return c.runLed(ctx, context.WithoutCancel(ctx))
	}
	everywhere := Runnable{
		Name: "controller " + name + " (every replica)",
		Run:  c.runEverywhere,
		Busy: c.busy,
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	err := m.names.Take(name, made) // an error naming what made each, if taken
	if err != nil {
		m.misuseLocked(err)
		return
	}
	m.byName[name] = c
	err = errors.Join(
		m.addLocked(runnable),
		m.addLocked(everywhere),
	)
	if err != nil {
		c.logError(err.Error())
	}
}
