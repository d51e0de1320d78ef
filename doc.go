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
//  1. errors.go: how kctl's errors read and wrap (ErrNotInstalled, which
//     internal/discovery's error of a resource not served matches;
//     internal/errtext keeps one "kctl: " in a chain).
//  2. resource.go: Object, Resource and Key: which API resource a Go type
//     is.
//  3. conn.go: Conn, one connection: NewConn, and do (internal/transport:
//     user agent, timeouts, rate limit, retries of 429, Warning headers,
//     the pooled buffers answers are read into).
//  4. codec.go: objects as protobuf or JSON, decoded by their content
//     type (an object that does not decode is an internal/undecodable
//     Error naming it, with its key if its metadata decodes alone); lists;
//     a watch's events, decoded one by one
//     (internal/transport's Stream reads them, sorts their types and ends
//     a silent watch; the codec decodes each object); typeOps, what the
//     core needs of T itself, so that the data path (over P = *T) is
//     compiled once for every type, and its deepCopy (internal/objcopy:
//     DeepCopyInto or a JSON round trip). internal/objcodec encodes an object,
//     splits a list answer into its items, decoded one by one, and holds a
//     resource's Wire: the media type asked for (the objects whole, or
//     their metadata alone), the protobuf envelope, managedFields skipped,
//     equal maps shared by a cache's objects; internal/presize decodes an
//     object with each slice made once; internal/protowire reads the
//     protobuf wire and the Kubernetes messages in it (Status, ListMeta,
//     an object's metadata).
//  5. client.go: Client[T]: a typed request (its path and a list's query:
//     internal/apitype), its answer, its errors (internal/discovery checks
//     a declared type against the server and makes a failed answer an
//     error); the writeNotes hook.
//  6. client_reads.go: Get, List (internal/pager joins its pages and peeks
//     a protobuf page's continue token; internal/errtext names objects
//     left out), and the list pages and watches (their query parameters:
//     internal/apitype).
//  7. client_writes.go: Create, Update, UpdateStatus, Delete.
//  8. handler.go: the core's event, and how events reach a handler: each
//     has its own goroutine and unbounded buffer (internal/mailbox).
//  9. store.go: the informer's objects by key and its label and field
//     indexes; a cached List is planned and walked by internal/index
//     (which also makes each namespace's map once for a first list);
//     internal/undecodable marks the objects that do not decode, whose
//     last good copy the store keeps.
//  10. informer.go: Informer[T]: its state and its core's reads (Get,
//     List, waits: internal/progress wakes the waiters and says why a
//     wait, or Err, fails), compiled once for every T; the shard selector
//     (data that sharding sets) and the resync hook.
//  11. apply.go: how a list's result and a watch's events reach the store;
//     objects that stop or start decoding (internal/undecodable tracks and
//     logs them, and a list's object without a key, or a watch event
//     skipped); the start of each list or watch (begin), which reshard
//     ends.
//  12. list_watch.go: the informer's write side: paged list
//     (internal/pager assembles the pages that internal/readahead fetches
//     ahead), watch, relist after 410, backoff (internal/watchretry: the
//     wait and its log, the watch timeout); the stream hook.
//  13. cache.go: Cache, one informer per resource (internal/scope: the
//     namespaces a scope watches, whether it narrows, and each type's
//     configuration, PerType: scope, transform, resync, metadata-only
//     refusal); its made hook and its read barrier. What a cached read
//     does when no informer exists (refuse, fail with ErrNotCached, or
//     warn of an unscoped type) is internal/readmiss; what is done to each
//     object before it is stored (managedFields dropped, TransformFor, the
//     decoder's skip and reuse) is internal/objprep.
//  14. cache_reads.go: cached Client reads, as copies, after the barrier
//     (a Get's not-found error is internal/readmiss's).
//  15. predicate.go: ObjectEvent, Predicate and Trigger (why a key is
//     queued, how: at low priority, kept while not running; and merge: how
//     a later cause folds into the first); the informer events a source
//     passes on, or replays.
//  16. queue.go: Queue: fair, stingy, exclusive, delays, priority, pacing;
//     its lock and blocking Get around its keys' states and the rules that
//     move them (internal/keyqueue: queued, processing, dirty, waiting,
//     the pacing defaults, and when a closed queue is drained; its line,
//     first in first out or low keys behind normal ones, is
//     internal/keyline, its waiting keys, a heap with one timer,
//     internal/keywait); AddRateLimited and its RateLimiter (its default's
//     delays: internal/backoff), ShutDown and ShutDownWithDrain (the close
//     and the ends of the drain's wait, drained or a later ShutDown:
//     internal/keyqueue's Shut and Drain; the wait and its errors:
//     internal/shutdown's WaitDrained).
//  17. runnable.go: Runnable, as a task of a goroutine group, and the two
//     contexts of a leadership term (the schedule of a graceful shutdown
//     is internal/shutdown's).
//  18. controller.go: Controller[T]: the reconcile contract, its hooks
//     (the reconcile chain of middleware, controllerObserver, keyOwner),
//     and events into keys: predicates (the first that drops an event
//     stops it; each names itself to the observer: noting, floor 2), low
//     priority (lowIf: WithPriority's function, else lowByDefault, initial
//     lists and resyncs), then enqueue (the keys' causes are kept in internal/causes' Ledger: first
//     cause wins and later ones merge, QueuedAgain's channels, keys kept
//     while not running; an update's kinds of change are
//     internal/metachange's).
//  19. worker.go: a reconcile's life: wait for caches, a new run's queue
//     (the kept keys from the Ledger first, then the replay), dequeue (the
//     key's cause taken from the Ledger), the reconcile chain (its read
//     step: the cached copy, panics; a reconcile's log ID is
//     internal/ctrlnames'), requeue (the wait's cause); waitsFor, the
//     first cache not synced (for the log, and the readiness check); the end
//     of a run is internal/shutdown's Drain (reconciles drained until
//     DrainBy, or cancelled at once when leadership is lost).
//  20. manager.go: Manager: newManager (its defaults, metrics registry and
//     probe checks are NewManager's), its observers, elect and member
//     hooks, ClientFor, Add (runnables wait for Start, or run in every
//     term: internal/group's Pending and Terms), builder misuse
//     (internal/misuse).
//  21. manager_controllers.go: NewController; the Manager as its
//     controllers' host (a controller's name is taken once:
//     internal/ctrlnames).
//  22. start.go: Manager.Start (it returns the first error of its work
//     groups, where a shard member records its lost Lease), and lead, one
//     leadership term (a term's runnables are internal/group's Terms; the
//     Event writers, stopped after the rest, its Last; the logs of
//     abandoned work are internal/shutdown's).
//
// Floor 1 declares ten points the floors above fill, each documented
// where it is declared with what fills it, and called in one place (the
// Conn's in its two request paths): a Conn's requests observer (conn.go); a Client's writeNotes (client.go); an informer's resync (informer.go) and
// stream (list_watch.go); the Cache's made hook and read barrier
// (cache.go); a controller's reconcile chain, its controllerObserver (made
// by the Manager's observers hook) and keyOwner (the Manager's member:
// which keys this replica owns, and the lease of a run on every replica)
// (controller.go); and the Manager's elect (manager.go). A controller's
// priority function lowIf is, like its predicates, the value of a builder
// option (NewController sets lowByDefault, WithPriority replaces it), not
// a point a floor fills; nor is an informer's
// shard selector, data that sharding sets (setShard, floor 3) and floor 1
// only reads. Floor 1 builds its Manager and Cache with newManager and
// newCache; the exported constructors are floor 2's last file.
//
// # Floor 2: production behaviours
//
// Floor 2 is production behaviour on those points, read second:
// client_more.go (Patch, PatchType, PatchOptions; Apply, ApplyConfig,
// DeleteWithOptions, DeleteAllOf; ObjectClient; Uncached; Declare, a
// user's own type's Resource; LoadConfig), cache_options.go (ScopeFor,
// TransformFor, ResyncFor; the periodic resync on the informer's resync
// hook, spread by internal/resync; an Informer's own indexes, AddIndex and
// ByIndex; the Manager's field indexes, IndexField and MatchingField),
// informer_more.go (an Informer as its user reads it: the T-typed Get,
// List and AddHandler, and Event[T]; Stats and Undecodable for the metrics page;
// WaitForResourceVersion and the wait for one object that read your writes
// uses), watch_list.go (the watch-list stream and its request,
// sendInitialEvents, on the informer's stream hook; pages after a
// refusal), controller_sources.go (configure, through which every builder
// call goes; Owns and Watches, other types' events as keys; FromChannel,
// keys from outside the cluster), metadata.go (MetadataInformerFor: a
// cache of metadata only, under its own key, its codec, and the error a
// cached read of whole objects then gets; OwnsMetadata, WatchesMetadata),
// controller_options.go (builder options; noting, which makes each
// predicate of T's events name its drop for the history; the built-in
// predicates; use,
// which adds a step to the reconcile chain: WithReconcileTimeout, OnDelete
// and WithMiddleware, a user's own steps; LoggerFrom, WithLogger,
// TriggerFrom and QueuedAgain, what a reconcile asks of its context;
// Enqueue and EnqueueWithPriority; NeedLeader; Priority and WithPriority,
// which set lowIf; NewKeyController, a reconcile function of keys),
// finalizer.go (Finalizer, a step of the chain; AddFinalizer,
// RemoveFinalizer), readyourwrites.go (the writeNotes and the read
// barrier: cached reads and the next reconcile wait for this Manager's own
// writes), queue_more.go (what a Queue tells of itself beyond the data
// path: ShuttingDown, and WaitingUntil, which KeepHistory reads; and
// NewRateLimiter) and
// constructors.go (NewManager and NewCache: floor 1's newManager and
// newCache, with Options' defaults and the klog switch, the watch-list
// stream, the resync, read your writes, the Manager's own metrics (its
// registry, which also counts the Conn's requests) and its own probe
// checks on their points, the readiness check of the controllers' caches
// among them (notReady: which cache each waits for, and why);
// Manager.Config; SignalContext).
//
// # Floor 3: the extras
//
// Floor 3 is the extras: helpers.go (CreateOrUpdate, CreateOrPatch,
// SetControllerReference, RetryOnConflict; OwnsEveryOwner,
// SetOwnerReference; ObjectReferenceOf, Manager.Enqueue), recorder.go
// (EventRecorder, writing events.k8s.io/v1 Events or core/v1 ones;
// WarnAfterFailures and WithMaxRetries, steps of the chain), leader.go
// (LeaderElection, ElectLeader, through the Manager's elect hook),
// user_metrics.go (Metrics, a program's own series; Reserved), server.go
// (HTTPServer, ServeMetrics; what the serving packages use of a Manager:
// Logger, ReportMisuse, DrainDeadline; UserInfo; ServeHealth,
// AddReadyCheck, AddHealthCheck, AddNotedReadyCheck, WithLivenessBound,
// which reads the reconciles in flight;
// ServeSecureMetrics: TokenReview and SubjectAccessReview through kctl's
// own client), history.go (KeepHistory, History, Histories: it wraps the
// Manager's observers hook), and sharding (Manager.Shard, through the
// Manager's member, the cache's made hook and the informers' shard
// selector): shard.go (ShardOptions, the design, what a member needs of
// each informer and controller, and the probe: does the server serve
// ShardSelector), shard_members.go (the Lease group), shard_state.go and
// shard_run.go (a member's ranges, handovers and loop), shard_manager.go
// (Manager.Shard).
//
// # Serving packages and leaves
//
// Serving lives in packages of its own, built on kctl's exported API only,
// as net/http keeps httptest and pprof apart: kctl/webhook (Serve,
// Validate, Default, Convert) and kctl/debug (ServeHistory, ServePprof);
// beside them kctl/kbflags, a main.go's kubebuilder flags.
//
// Leaves that need no kctl type live in internal/: clusterconfig
// (LoadConfig's search and the checks that name a broken kubeconfig),
// transport (a request's user agent, timeouts, rate limit, 429 retries and
// Warning headers; a failed answer's Status; the pooled answer buffers; a
// watch's bound and its events, read and decoded), apitype (a Go type's
// Resource, its request path and TypeMeta), protowire, presize (protobuf
// decoded with each slice made once), objcodec (an object encoded as a
// request body; a list answer's items decoded one by one; Wire, a
// resource's media type and protobuf decoding), pager (a
// List's pages joined, starting over when the continue token expires),
// objcopy (an object's deep copy:
// DeepCopyInto, or a JSON round trip and what a CRD struct needs for it),
// discovery (the discovery documents, cached, a declared type checked
// against them, and a failed answer made an error), index (label and
// field indexes, field selectors, a cached List's plan and its walk),
// undecodable (a cache's objects that do not decode: the mark, forget and
// relist rules and their log lines; an object's decoding Error), progress
// (how an informer's readers wait for it and the error that says what it
// waits for), scope (the
// namespaces a cache's scope watches, and whether one list or watch takes
// in an object), resync (the
// resync schedule), readahead (a paged list's pages fetched ahead),
// watchretry (an informer's retry wait and its log, the watch timeout,
// and a resourceVersion that is gone), mailbox (the unbounded buffer and
// goroutine between an informer and each handler), causes (a controller's Ledger of why
// each key is queued, why a wait brings it back, QueuedAgain's channels
// and the keys kept while it does not run), metachange (an update's kinds
// of change; the built-in predicates' comparisons), ctrlnames (a
// Manager's controller names, taken once, and the file and line that made
// each; each reconcile's log ID), misuse (builder mistakes, kept for Start or logged once it has
// begun), rvorder (resourceVersions in order), nscover (the namespaces a
// shard member's caches hold, by resource), keyqueue (a Queue's keys and
// the rules that move them: queued, processing, dirty, waiting; it does
// no locking, the Queue locks around it), keyline (a Queue's lines),
// keywait (a Queue's waiting keys: a heap and its one timer), backoff
// (the default RateLimiter's backoff and token bucket), shutdown (the
// schedule of a graceful shutdown: when in-flight reconciles are
// cancelled, leader work is abandoned, the lease released and the Event
// writers stopped; a controller's drain, a queue's drain wait, and the
// Manager's shutdown texts: abandoned work's logs, Add's error once the
// shutdown has begun),
// readmiss (a cached read that finds no informer: refused, failed with
// ErrNotCached, or warned of when unscoped), objprep (a cache's prepare
// of each object: managedFields dropped, the transform, the decoder set
// to match), pendingwrites, share, metrics, prom (the metrics
// page's text and its name checks), group (goroutine groups, and the
// Manager's runnables: Pending until Start, Terms for leader-only ones,
// Last for the Event writers), fieldlabel (the field labels a
// server filters by), warnings (the server's Warning headers, logged once
// each), election (one replica's side of a Lease election), events (Event
// repeats, the flood limit, merging), metricsauth (the secure metrics
// page's reviews and verdicts), history (per-key reconcile books),
// errtext (how a kctl error wraps another), serve (the HTTP serving loop
// every server shares), jsonpatch (a defaulting webhook's patch;
// CreateOrPatch's merge diff), certwatch (a serving certificate reloaded
// from disk), certs (a self-signed certificate), health (the probe checks
// and the /healthz and /readyz handler), shardhash (the server's shard
// hash, selectors and assignment) and handover (when a shard's range may
// move between replicas, and a member's record of its ranges).
//
// # How data flows
//
// An object's change travels through nine files of floor 1 from its watch
// frame to your reconcile (eleven with conn.go and client_reads.go, whose
// do and watch opened the watch): codec.go (watchStream, internal/transport's
// Stream: Next reads the event, the codec decodes its object into
// *T) → list_watch.go (follow) → apply.go (apply stores it in store.go
// under the informer's lock and emits an Event) → handler.go (the
// handler's goroutine, fed by internal/mailbox's buffer) → predicate.go (live passes it on) → controller.go
// (onEvent: the predicates pass it, enqueue queues its Key) → queue.go
// (Add, then a worker's Get) → worker.go (processNext, handle: the
// reconcile chain, whose read step hands your function a copy of the
// cached object). Your writes go back through client_writes.go and
// client.go (send, call).
//
// A reconcile that fails is retried along three files of floor 1 and
// their leaves:
//
//  1. worker.go: handle sees the error, requeue records why the key
//     comes back (Ledger.Wait, internal/causes),
//  2. predicate.go: as a Trigger with Cause "retry",
//  3. queue.go: and calls Queue.AddRateLimited, which asks the
//     RateLimiter (its default's delays are internal/backoff) for the
//     key's backoff, then adds the key (add) to
//  4. internal/keyqueue: Keys.Add holds it back in internal/keywait, the
//     heap of waiting keys, whose timer fires when it is due (Queue.fire
//     in queue.go calls Keys.Due); ready puts it in the Queue's line
//     (internal/keyline), from which a worker's Get takes it (Keys.Pop).
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
// OnDelete (none), WarnAfterFailures (none), WithLivenessBound (none),
// Owns (the controller owner
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
// (internal/objcodec's Wire, internal/presize) with each slice made once at its length, and, in a cache, a
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
