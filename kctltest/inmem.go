package kctltest

import (
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/kctl-dev/kctl"
	"k8s.io/client-go/rest"
)

// StartInMemory returns an Env whose API server is an http.Handler in the
// test process, reached through rest.Config.Transport: no binary, no
// socket, no port, no TLS; each call returns a new, empty one (with the
// namespaces default, kube-system, kube-public and kube-node-lease), in
// about a millisecond. Its Conn, Config, Namespace, Apply, Delete,
// Manager and StartManager work as with Start, so that a test switches by
// changing one line:
//
//	env := kctltest.StartInMemory(t) // was: kctltest.Start(t)
//
// It serves kctl's data path on the real wire formats (JSON; protobuf
// for k8s.io/api types when asked first; PartialObjectMetadata): get; list
// with label and field selectors (the API server's field labels), limit
// and continue (the later pages as of the first page's resourceVersion,
// 410 Gone once compacted past it); watch from a resourceVersion, with
// bookmarks, 410 Gone (an ERROR event) from a compacted one (Compact),
// and the watch-list stream (sendInitialEvents, ended by its annotated
// BOOKMARK); create, update, the status subresource, the scale
// subresource of Deployments, ReplicaSets, StatefulSets and
// ReplicationControllers (an autoscaling/v1 Scale of spec.replicas: get,
// update, patch), a Pod's eviction (which deletes it), merge, JSON and
// strategic merge patches, server-side apply with field managers and
// conflicts (see FakeClient for how far each goes); delete with
// preconditions and propagation (background, foreground, orphan),
// finalizers and deletionTimestamp; generation and resourceVersion as the
// API server sets them; Leases (so leader election) and Events as any
// k8s.io/api resource; CRDs, applied from YAML (Established at once, their
// resources in discovery) or declared with kctl.Declare (served with a
// status subresource, without a CRD). It also does at once what the
// controller-manager would do: the garbage collector deletes the objects
// whose owners are all gone (in the background, or first with foreground
// propagation; orphan propagation removes the owner references), and a
// namespace being deleted empties, then goes.
//
// What it does not model: admission webhooks, RBAC and authentication
// (every request is the admin's; Unprivileged, ServiceAccount, Kubectl and
// RestartAPIServer fail the test), defaults and validation from OpenAPI
// or a CRD's schema (a write the server would reject, or fill in,
// is stored as sent; the fields of a k8s.io/api type's Go struct are
// kept), quotas and limits, PodDisruptionBudgets (an eviction is always
// allowed), the other subresources (binding, ephemeralcontainers, resize,
// log, exec...), server-side apply of the scale subresource (apply of the
// status is modelled, with its owners apart from the object's), dry
// runs, and events.k8s.io/v1, which a real server serves as a second view
// of core/v1's Events: here it is not served (kctl's EventRecorder then
// writes core/v1 Events, as to a server that turned the group off). Those
// answer with
// 501 Not Implemented naming Start, or are listed here: test them with
// Start.
//
// It runs in a testing/synctest bubble when called inside it: the whole
// Manager (informers, queue, backoff, RequeueAfter, leader election) then
// runs on the bubble's fake clock, and time.Sleep(10*time.Minute) is
// instant. Make the Env inside the bubble, and stop the Manager before it
// ends (StartManager's cleanup does, within the test). There, the Manager
// of StartManager serves no metrics page (a socket would stall the
// bubble's clock): RunningManager.Reconciles fails the test.
//
// InjectError, DropWatches and Compact make the server fail as a test needs.
func StartInMemory(t TB) *Env {
	t.Helper()
	s := newMemServer()
	cfg := &rest.Config{Host: "http://kctltest.inmemory", Transport: &memTransport{h: s}, QPS: -1}
	conn, err := kctl.NewConn(cfg)
	if err != nil {
		t.Fatalf("kctltest: StartInMemory: %v", err)
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatalf("kctltest: StartInMemory: %v", err)
	}
	e := &Env{Conn: conn, cfg: cfg, http: hc, mem: s}
	e.discovery.env = e
	if reflect.TypeOf(t).Comparable() {
		serversOf.Store(t, s)
		t.Cleanup(func() { serversOf.CompareAndDelete(t, s) })
	}
	return e
}

// serversOf holds, by test (TB), the in-memory server it made last, so
// that Eventually(t, ...) calls its check soon after that server changes
// rather than at its next poll.
var serversOf sync.Map

// changesOf returns a channel closed at the next change of the in-memory
// server t made last; nil (never closed) if it made none.
func changesOf(t TB) <-chan struct{} {
	if !reflect.TypeOf(t).Comparable() {
		return nil
	}
	v, ok := serversOf.Load(t)
	if !ok {
		return nil
	}
	f := v.(*memServer).fake
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.log.changed
}

// injectVerbs are the verbs InjectError knows.
var injectVerbs = []string{"get", "list", "watch", "create", "update", "patch", "apply", "delete"}

// InjectError makes every later request of verb ("get", "list", "watch",
// "create", "update" (of the status too), "patch", "apply" or "delete")
// on resource (its plural, with its group if any: "pods",
// "replicasets.apps", "widgets.example.com"; "*" for every resource) of
// an in-memory Env (StartInMemory) call fail with the namespace and name
// the request is about ("" for a list's name); when fail returns an error,
// the request is answered with it (an apierrors error as its Status, e.g.
// apierrors.NewTooManyRequests for a 429 with Retry-After; any other as a
// 500) and changes nothing. A nil fail removes it. An unknown verb, or an
// Env of Start, fails the test.
//
//	env.InjectError(t, "update", "replicasets.apps", func(ns, name string) error {
//		return apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "replicasets"}, name, errors.New("injected"))
//	})
func (e *Env) InjectError(t TB, verb, resource string, fail func(namespace, name string) error) {
	t.Helper()
	if !e.inMemory(t, "InjectError") {
		return
	}
	if !slices.Contains(injectVerbs, verb) {
		t.Fatalf("kctltest: InjectError: no verb %q: use one of %v", verb, injectVerbs)
	}
	s := e.mem
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inject == nil {
		s.inject = map[string]func(string, string) error{}
	}
	k := verb + " " + strings.TrimSuffix(resource, ".")
	if fail == nil {
		delete(s.inject, k)
		return
	}
	s.inject[k] = fail
}

// DropWatches ends every open watch of an in-memory Env, as a restart of
// the API server or a broken connection does: each client watches again
// from the last resourceVersion it saw.
func (e *Env) DropWatches(t TB) {
	t.Helper()
	if !e.inMemory(t, "DropWatches") {
		return
	}
	s := e.mem
	s.mu.Lock()
	defer s.mu.Unlock()
	for drop := range s.watches {
		close(drop)
		delete(s.watches, drop)
	}
}

// Compact forgets the history of an in-memory Env up to now, as etcd's
// compaction does: a watch behind it, or one opened from an older
// resourceVersion, gets 410 Gone (an ERROR event whose Status is
// Expired) and must list again; so does a list's continue token.
func (e *Env) Compact(t TB) {
	t.Helper()
	if !e.inMemory(t, "Compact") {
		return
	}
	f := e.mem.fake
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log.compact(f.rv)
	close(f.log.changed) // wake the watches behind
	f.log.changed = make(chan struct{})
}

// inMemory tells whether e is StartInMemory's, and fails t naming what
// needs it if not.
func (e *Env) inMemory(t TB, what string) bool {
	t.Helper()
	if e.mem == nil {
		t.Fatalf("kctltest: %s works on an Env of StartInMemory only: a real API server cannot be made to do it", what)
		return false
	}
	return true
}

// needsControlPlane fails t if e is in memory, naming what needs the real
// control plane.
func (e *Env) needsControlPlane(t TB, what string) bool {
	t.Helper()
	if e.mem != nil {
		t.Fatalf("kctltest: %s needs the real control plane: the in-memory server (StartInMemory) does not model it; use Start", what)
		return false
	}
	return true
}
