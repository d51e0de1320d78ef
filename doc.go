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
// The core is what carries data from the API server to your reconcile and
// back. Each file uses only the files before it, so you can stop after any:
//
//  1. errors.go: how kctl's errors read and wrap (ErrNotInstalled).
//  2. resource.go: Object, Resource and Key: which API resource a Go type is.
//  3. conn.go: Conn, one connection: configuration, rate limit, retries of 429.
//  4. codec.go: objects as protobuf or JSON (or their metadata only); lists;
//     typeOps, what the core needs of T itself, so that the data path (over
//     P = *T) is compiled once for every type.
//  5. watch_stream.go: a watch's events, decoded one by one.
//  6. client.go: Client[T]: a typed request, its answer, its errors.
//  7. client_reads.go: Get, List, and the list pages and watches.
//  8. client_writes.go: Create, Update, Patch, Apply, Delete.
//  9. handler.go: Event[T], and how events reach a handler.
//  10. store.go: the informer's objects, indexes and field selectors.
//  11. informer.go: Informer[T]: its state and reads (Get, List, waits).
//  12. apply.go: how a list's result and a watch's events reach the store.
//  13. list_watch.go: the informer's write side: list, watch, relist, backoff.
//  14. readyourwrites.go: cached reads wait for this Manager's own writes.
//  15. cache.go: Cache, one informer per resource; cache_reads.go: cached
//     Client reads.
//  16. predicate.go: ObjectEvent, Predicate and Trigger (why a key is queued).
//  17. sources.go: events of owned and watched objects turned into keys.
//  18. ratelimit.go: RateLimiter: the per-key backoff and the token bucket.
//  19. queue_line.go: the first-in, first-out line of queued keys.
//  20. queue_delay.go: the keys waiting for a time, in a heap with one timer.
//  21. queue.go: Queue: fair, stingy, exclusive, with priorities, delays
//     and AddRateLimited.
//  22. queue_shutdown.go: how a Queue ends: ShutDown, ShutDownWithDrain.
//  23. runnable.go: Runnable, and the two contexts of a leadership term.
//  24. shutdown.go: the schedule of a graceful shutdown; SignalContext.
//  25. controller.go: Controller[T]: its builder, predicates and enqueue.
//  26. controller_sources.go: Owns and Watches, other types' events as keys.
//  27. worker.go: a reconcile's life: wait for caches, dequeue, reconcile, requeue.
//  28. checks.go: the Manager's readiness and liveness checks.
//  29. manager.go: Manager: NewManager, ClientFor, Add.
//  30. manager_controllers.go: NewController, and the Manager as its controllers' host.
//  31. start.go: Manager.Start, and lead, one leadership term.
//
// # How data flows
//
// An object travels: conn.go (Conn.do sends the request) → codec.go and
// watch_stream.go (decodeList, watchStream.Next decode it into *T) →
// list_watch.go (Informer.list, or the watch-list stream) → apply.go
// (stored and apply store it in store.go and emit an Event) →
// handler.go (the handler's goroutine) → controller.go (onEvent: the
// predicates pass it, enqueue queues its Key) → queue.go (Add, then a
// worker's Get) → worker.go (processNext, handle, reconcileKey: a copy of
// the cached object to your function) → client.go and client_writes.go
// (your writes go back to the API server).
//
// A reconcile that fails is retried along six files:
//
//  1. worker.go: handle sees the error, requeue records why the key
//     comes back,
//  2. predicate.go: as a Trigger with Cause "retry",
//  3. queue.go: and calls Queue.AddRateLimited, which asks
//  4. ratelimit.go: RateLimiter.When for the key's backoff, then holds
//     the key back (add, waitLocked) in
//  5. queue_delay.go: the heap of waiting keys, whose timer fires when it
//     is due (Queue.fire); readyLocked queues it in
//  6. queue_line.go: the line a worker's Get (queue.go) takes it from.
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
// # What you can skip
//
// The extras attach to hooks the core declares, and the core reads
// completely without them: leader.go (ElectLeader, through the Manager's
// elect hook), recorder.go (EventRecorder), user_metrics.go (your own
// metrics), server.go (ServeMetrics, HTTPServer), health.go (ServeHealth),
// finalizer.go (Finalizer wraps the reconcile function; AddFinalizer,
// RemoveFinalizer), keycontroller.go
// (NewKeyController, through the byKey hook), controller_options.go
// (WithReconcileTimeout, NeedLeader, WithPriority), index.go (IndexField,
// MatchingField), owner.go (OwnsEveryOwner, SetOwnerReference),
// port.go (ObjectReferenceOf, Manager.Enqueue), history.go (KeepHistory,
// History, through the Manager's history hook and the controller's
// historian), debug.go (ServeDebug), failure_events.go
// (WarnAfterFailures, through the controller's failed hook),
// webhook_server.go (ServeWebhooks: one HTTPS server on every replica),
// webhook_admission.go (Validate, Default), webhook_conversion.go
// (Convert), metrics_auth.go (ServeSecureMetrics: TokenReview and
// SubjectAccessReview through kctl's own client), pprof.go (ServePprof),
// metadata.go (MetadataInformerFor: a cache of metadata only),
// sharding (Manager.Shard, through the Manager's ownsKey and
// informerMade hooks: shard.go's options and design, shard_manager.go,
// shard_members.go's Lease group, shard_state.go and shard_run.go, a
// member's ranges and its loop, shard_informer.go, shard_probe.go) and
// helpers.go (CreateOrUpdate, CreateOrPatch,
// SetControllerReference, RetryOnConflict). Leaves that need no kctl type
// live in internal/: apitype, protowire, presize (protobuf decoded with
// each slice made once), discovery, pendingwrites, share,
// metrics, prom, group, fieldlabel (the field labels a server filters
// by), warnings (the server's Warning headers, logged once each),
// jsonpatch (a defaulting webhook's patch), certwatch (a serving
// certificate reloaded from disk), certs (a self-signed certificate),
// shardhash (the server's shard hash, selectors and assignment) and
// handover (when a shard's range may move between replicas).
// The metrics registry plugs into the core's observers (Conn's
// requestObserver, controllerObserver) in NewManager.
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
// ServeMetrics, ServeSecureMetrics, ServeHealth, ServeWebhooks,
// ServePprof, ServeDebug, ElectLeader, Shard (each off unless called;
// Shard excludes ElectLeader). A controller
// name is taken once per Manager; Config returns its rest.Config.
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
// Package kctltest starts a real kube-apiserver and etcd for a test binary,
// and offers a fake Client. The package's own tests run against the same
// control plane; fault-injection tests use httptest servers.
package kctl
