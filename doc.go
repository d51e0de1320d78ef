// Package kctl is a small Kubernetes controller framework with generics.
//
// A Controller[T] watches one Go type (corev1.Pod, appsv1.ReplicaSet, or your
// own CRD struct) and calls your reconcile function with the latest *T. No
// Scheme, no RESTMapper, no code generation: the Go type says what is watched.
// A Manager shares one connection, one cache and the leader election between
// controllers, and runs them until its context ends.
//
//	mgr, err := kctl.NewManager(kctl.Options{})
//	if err != nil { ... }
//	pods := kctl.ClientFor[corev1.Pod](mgr)
//	rsets := kctl.ClientFor[appsv1.ReplicaSet](mgr)
//	c := kctl.NewController(mgr, "podcount", func(ctx context.Context, rs *appsv1.ReplicaSet) (kctl.Result, error) {
//		sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
//		if err != nil { return kctl.Result{}, kctl.Terminal(err) } // retrying cannot fix it
//		list, err := pods.List(ctx, kctl.ListOptions{Namespace: rs.Namespace, Labels: sel})
//		if err != nil { return kctl.Result{}, err }
//		if rs.Labels == nil {
//			rs.Labels = map[string]string{}
//		}
//		rs.Labels["pod-count"] = strconv.Itoa(len(list))
//		return kctl.Result{}, rsets.Update(ctx, rs)
//	})
//	kctl.Owns[corev1.Pod](c) // a Pod's controller owner reference enqueues its ReplicaSet
//	err = mgr.Start(kctl.SignalContext())
//
// # Reading order
//
// kctl is one package in three floors. Floor 1 is the data path: what
// carries an object from the API server to your reconcile and a write
// back. Each of its files uses only the files before it, so you can stop
// after any:
//
//  1. errors.go: how kctl's errors read and wrap (ErrNotInstalled).
//  2. resource.go: Object, Resource and Key: which API resource a Go type is.
//  3. conn.go: Conn, one connection: LoadConfig (internal/clusterconfig
//     finds the configuration), NewConn, and do (internal/transport: user
//     agent, timeouts, rate limit, retries of 429, Warning headers).
//  4. codec.go: objects as protobuf or JSON (or their metadata only); lists;
//     typeOps, what the core needs of T itself, so that the data path (over
//     P = *T) is compiled once for every type. internal/protowire reads the
//     protobuf wire (envelopes, lists, around managedFields, watch frames).
//  5. watch_stream.go: a watch's events, decoded one by one.
//  6. client.go: Client[T]: a typed request, its answer, its errors; the
//     writeNotes hook, which read-your-writes fills.
//  7. client_reads.go: Get, List, and the list pages and watches.
//  8. client_writes.go: Create, Update, UpdateStatus, Patch, Delete.
//  9. handler.go: Event[T], and how events reach a handler.
//  10. store.go: the informer's objects by key; its label and field
//     indexes are internal/index.
//  11. informer.go: Informer[T]: its state and reads (Get, List, ByIndex,
//     waits), thin T-typed methods over the shared core.
//  12. apply.go: how a list's result and a watch's events reach the store;
//     undecodable objects; resync batches (internal/resync's schedule).
//  13. list_watch.go: the informer's write side: paged list (read ahead by
//     internal/readahead), watch, relist after 410, backoff; the stream hook.
//  14. watch_list.go: the watch-list stream (sendInitialEvents) on that
//     hook, pages after a refusal.
//  15. cache.go: Cache, one informer per resource; its made hook and its
//     read barrier.
//  16. cache_reads.go: cached Client reads, as copies, after the barrier.
//  17. readyourwrites.go: the barrier's filler: cached reads and the next
//     reconcile wait for this Manager's own writes.
//  18. predicate.go: ObjectEvent, Predicate and Trigger (why a key is queued).
//  19. sources.go: events of owned and watched objects turned into keys.
//  20. ratelimit.go: RateLimiter: the per-key backoff and the token bucket.
//  21. queue_delay.go: the keys waiting for a time, in a heap with one timer.
//  22. queue.go: Queue: fair, stingy, exclusive, delays, pacing and
//     AddRateLimited; its line (first in, first out, or low keys behind
//     normal ones) is internal/keyline.
//  23. queue_shutdown.go: how a Queue ends: ShutDown, ShutDownWithDrain.
//  24. runnable.go: Runnable, and the two contexts of a leadership term.
//  25. shutdown.go: the schedule of a graceful shutdown; SignalContext.
//  26. controller.go: Controller[T]: the reconcile contract, its hooks (the
//     reconcile chain of middleware, controllerObserver, the host and
//     keyOwner), filters and enqueue.
//  27. controller_sources.go: Owns and Watches, other types' events as keys.
//  28. worker.go: a reconcile's life: wait for caches, dequeue, the reconcile
//     chain (its read step: the cached copy, panics), requeue.
//  29. checks.go: the Manager's readiness and liveness checks.
//  30. manager.go: Manager: NewManager, the observers hook and its metrics
//     observer, ClientFor, Add.
//  31. manager_controllers.go: NewController; the Manager as its
//     controllers' host and shard keyOwner.
//  32. start.go: Manager.Start, and lead, one leadership term.
//
// Floor 1 declares the points the floors above fill, each documented where
// it is declared: the writeNotes of a Client (client.go), the informer's
// stream (list_watch.go), the Cache's made hook and read barrier
// (cache.go), the reconcile chain, the controllerObserver and the shard
// keyOwner (controller.go), the Manager's observers, elect, ownsKey and
// informerMade hooks (manager.go), and a controller's priority function.
// Two behaviours that are on by default stay in floor 1, called directly
// (watch_list.go, readyourwrites.go): floor 1 would otherwise have to
// switch them on from a later file.
//
// # Floor 2: production behaviours
//
// Floor 2 is production behaviour on those points, read second:
// client_more.go (Apply, ApplyConfig, DeleteWithOptions, DeleteAllOf;
// ObjectClient), metadata.go (MetadataInformerFor: a cache of metadata
// only; OwnsMetadata, WatchesMetadata), controller_options.go (builder
// options; WithReconcileTimeout and OnDelete are steps of the reconcile
// chain; NeedLeader, WithPriority), keycontroller.go (NewKeyController, a
// reconcile function of keys) and finalizer.go (Finalizer, a step of the
// chain; AddFinalizer, RemoveFinalizer).
//
// # Floor 3: the extras
//
// Floor 3 is the extras: helpers.go (CreateOrUpdate, CreateOrPatch,
// SetControllerReference, RetryOnConflict), recorder.go (EventRecorder),
// failure_events.go (WarnAfterFailures, a step of the chain),
// leader_elector.go and leader.go (ElectLeader, through the Manager's elect
// hook), user_metrics.go (Metrics, a program's own series; Reserved),
// server.go (HTTPServer, ServeMetrics; what the serving packages use of a
// Manager: Logger, ReportMisuse, DrainDeadline; UserInfo), health.go
// (ServeHealth, AddNotedReadyCheck), metrics_auth.go (ServeSecureMetrics:
// TokenReview and SubjectAccessReview through kctl's own client), index.go
// (IndexField, MatchingField), owner.go (OwnsEveryOwner,
// SetOwnerReference), port.go (ObjectReferenceOf, Manager.Enqueue),
// history.go (KeepHistory, History, Histories: it wraps the Manager's
// observers hook), channel_source.go (FromChannel), and sharding
// (Manager.Shard, through the Manager's ownsKey and informerMade hooks):
// shard.go (ShardOptions, the design, what a member needs of each
// informer, and the probe: does the server serve ShardSelector),
// shard_members.go (the Lease group), shard_state.go and shard_run.go (a
// member's ranges, handovers and loop), shard_manager.go (Manager.Shard).
//
// # Serving packages and leaves
//
// Serving lives in packages of its own, built on kctl's exported API only,
// as net/http keeps httptest and pprof apart: kctl/webhook (Serve,
// Validate, Default, Convert) and kctl/debug (ServeHistory, ServePprof).
//
// Leaves that need no kctl type live in internal/: clusterconfig
// (LoadConfig's search and the checks that name a broken kubeconfig),
// transport (a request's user agent, timeouts, rate limit, 429 retries and
// Warning headers), apitype, protowire, presize (protobuf decoded with each
// slice made once), discovery, index (label and field indexes, field
// selectors), resync (the resync schedule), readahead (a paged list's
// pages fetched ahead), keyline (a Queue's lines), pendingwrites, share,
// metrics, prom, group, fieldlabel (the field labels a server filters by),
// warnings (the server's Warning headers, logged once each), serve (the
// HTTP serving loop every server shares), jsonpatch (a defaulting
// webhook's patch), certwatch (a serving certificate reloaded from disk),
// certs (a self-signed certificate), shardhash (the server's shard hash,
// selectors and assignment) and handover (when a shard's range may move
// between replicas).
//
// # How data flows
//
// An object travels: conn.go (Conn.do sends the request) → codec.go and
// watch_stream.go (decodeList, watchStream.Next decode it into *T) →
// list_watch.go (Informer.list, or the watch-list stream of watch_list.go)
// → apply.go (stored and apply store it in store.go and emit an Event) →
// handler.go (the handler's goroutine) → controller.go (onEvent: the
// predicates pass it, enqueue queues its Key) → queue.go (Add, then a
// worker's Get) → worker.go (processNext, handle: the reconcile chain,
// whose read step hands your function a copy of the cached object) →
// client.go and client_writes.go (your writes go back to the API server).
//
// A reconcile that fails is retried along five files:
//
//  1. worker.go: handle sees the error, requeue records why the key
//     comes back,
//  2. predicate.go: as a Trigger with Cause "retry",
//  3. queue.go: and calls Queue.AddRateLimited, which asks
//  4. ratelimit.go: RateLimiter.When for the key's backoff, then holds
//     the key back (add, waitLocked) in
//  5. queue_delay.go: the heap of waiting keys, whose timer fires when it
//     is due (Queue.fire in queue.go); readyLocked puts it in the Queue's
//     line (internal/keyline), which a worker's Get takes it from.
//
// processNext (worker.go) sets Trigger.Attempt from NumRequeues and handle
// runs it again; success calls Forget, which resets the backoff. A
// Terminal error (controller.go) is logged and not retried.
//
// # Guarantees
//
//   - A key is never reconciled by two workers at once, however many workers run.
//   - Reconcile gets the cache's latest state of the object when the worker
//     takes the key, as a copy it may change.
//   - Read your writes: after a Client from ClientFor writes an object of a
//     type the cache holds (the controller's own type, children, anything),
//     a cached Get or List that could see it, and the next reconcile of its
//     key, wait until the cache holds that write, at most 10 s (see ClientFor;
//     a shard member: in the namespaces of the ranges it serves).
//   - Reconciliation is level-based: many events for one key before a worker
//     takes it give one reconcile. Do not count events; look at the state.
//   - An error requeues with controller-runtime's backoff (per key 5 ms
//     doubling up to 1000 s, at most 10 retries per second after a burst of
//     100); success forgets it; a panic is recovered and treated as an error;
//     a Terminal error is logged and not retried (even if the reconcile also
//     ran past its timeout); a Conflict is retried without an error log
//     line if it ends one of the first four attempts in a row that fail
//     (from the fifth, it is logged as an error), unless the reconcile ran
//     past its timeout, which is an error.
//   - kctl's own writes (finalizers) patch only what they change, guarded by
//     resourceVersion: fields the cache drops (TransformFor) are never erased.
//   - On shutdown, workers stop taking keys and in-flight reconciles get
//     most of Options.ShutdownTimeout (default 30 s) to finish; Start returns
//     within ShutdownTimeout, abandoning (and naming in the log) any work
//     that ignores its context.
//
// # Options and their defaults
//
// Of a controller (builder calls right after NewController):
// MaxConcurrentReconciles (1), WithReconcileTimeout (none), NeedLeader
// (true: only the leader runs it), WithRateLimiter (5 ms doubling to
// 1000 s per key, 10/s burst 100), WithQueueOptions (no pacing;
// AgeLowPriorityAfter a minute), WithPriority (low for initial lists,
// replays and resyncs), WithPredicates and WithEventFilter (none),
// OnDelete (none), WarnAfterFailures (none), Owns (the controller owner
// reference only; OwnsEveryOwner for every one). A controller of keys
// that name no object: NewKeyController.
//
// Of a Manager (Options, and calls before Start): Kubeconfig (LoadConfig's
// search: $KUBECONFIG, ~/.kube/config, in-cluster), Context (the
// kubeconfig's current-context), ShutdownTimeout (30 s),
// Logger (slog.Default()), KlogToLogger (false), Cache.DefaultScope
// (everything), Cache.Resync (never; ResyncFor per type, each period
// stretched by a random 0-10 %, one resync's re-deliveries spread over
// half its period), Cache.KeepManagedFields (false),
// Cache.ReaderFailOnMissingInformer (false), IndexField (none),
// KeepHistory (off; 10 entries for 1000 keys per controller),
// ServeMetrics, ServeSecureMetrics, ServeHealth, webhook.Serve,
// debug.ServePprof, debug.ServeHistory, ElectLeader, Shard (each off
// unless called; Shard excludes ElectLeader). A controller name is taken
// once per Manager; Config returns its rest.Config.
//
// # Memory and performance
//
// The cache stores each object once, shares equal strings, maps and lists
// between objects (internal/share), and drops managedFields unless asked.
// Built-in types travel as protobuf, decoded by hand around managedFields
// (codec.go) with each slice made once at its length, and, in a cache, a
// workload's container resources decoded once (internal/presize);
// declared types travel as JSON. A cached List is answered
// from indexes, so it costs what it returns (store.go).
//
// # Testing
//
// Package kctltest starts a real kube-apiserver and etcd for a test binary
// (Start), or an API server in the test process (StartInMemory: no binary,
// fake time under testing/synctest; one wire scenario checks that it
// answers as the real one does), and offers a fake Client. The package's
// own tests run against the real control plane; fault-injection tests use
// httptest servers.
package kctl
