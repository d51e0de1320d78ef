package kctltest

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kctl-dev/kctl"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// FakeClient holds objects of one type in memory and has the methods of
// kctl.Client[T] that a reconcile function mostly calls, with the same
// signatures: Get, List, Create, Update, UpdateStatus, Patch, Apply,
// ApplyConfig, Delete, DeleteWithOptions and DeleteAllOf. It is for plain unit tests of a reconcile function that reads and
// writes through a small interface of its own, which both satisfy:
//
//	type widgetClient interface {
//		Get(ctx context.Context, namespace, name string) (*Widget, error)
//		UpdateStatus(ctx context.Context, w *Widget) error
//	}
//
//	func reconcile(widgets widgetClient) func(context.Context, *Widget) (kctl.Result, error) { ... }
//
// and in main.go reconcile(kctl.ClientFor[Widget](mgr)), in the unit test
// reconcile(kctltest.NewFakeClient(t, &Widget{...})). kctl's helpers that
// write through a client (CreateOrUpdate, CreateOrPatch, AddFinalizer,
// RemoveFinalizer) take a kctl.ObjectClient, which a FakeClient is too. The
// FakeClients of one Fake (FakeClientIn) share its objects and its
// resourceVersions, one FakeClient per type, as one API server would.
//
// What it models, as the API server does: resourceVersion (a write with a
// stale one fails with Conflict; Create refuses one, with the server's 500;
// Update of a non-k8s.io/api type needs one; a write that changes nothing
// keeps it), uid, creationTimestamp,
// generation (bumped when anything but metadata and status changes, and by a
// Delete that sets deletionTimestamp), the status subresource of a type with a status field
// (Create drops the status, Update keeps the stored one, UpdateStatus changes
// only the status), merge patches (RFC 7386), JSON patches (RFC 6902),
// strategic merge patches of k8s.io/api types (refused for others, as
// kctl.Client refuses them), deletion with
// finalizers (Delete sets deletionTimestamp; the object goes when the last
// finalizer is removed) and DeleteWithOptions' UID and resourceVersion
// preconditions, DeleteAllOf, generateName, label selectors and field
// selectors on metadata.name and metadata.namespace, and server-side apply
// (Apply, ApplyConfig) by field managers: an apply creates the object, or
// sets the fields it applies and removes those the same manager applied
// before and no longer does; one that would change a field another
// manager set fails with the API server's Conflict naming both, unless
// Force; with PatchOptions.Subresource "status" it sets the status alone,
// its fields owned apart from the same manager's applies to the object.
// Lists are replaced whole, as a CRD's lists are by default. Errors are
// the API server's (apierrors.IsNotFound, IsConflict, IsAlreadyExists
// work). InjectError makes a verb fail as a test says.
//
// What it does not model, and says so with an error naming Start or
// StartInMemory: patches of other types, field selectors on other fields,
// apply of subresources other than status, Foreground and Orphan
// deletion. What it does not model at all: admission and validation (a
// write the server would reject succeeds), defaulting, garbage collection
// (deleting an owner leaves its children), the per-key merging of a
// k8s.io/api type's keyed lists by Apply, watches, caches and their
// staleness. Test those against a real API server with Start
// (StartInMemory models garbage collection, watches and caches too). A
// FakeClient is safe for concurrent use.
type FakeClient[T any] struct {
	fakeResource
	t TB // fails on a misuse of InjectError

	injectMu sync.Mutex
	inject   map[string]func(namespace, name string) error // by verb
}

// Fake is the memory of one or more FakeClients, one per type: what one API
// server stores. Make it with NewFake; it is safe for concurrent use.
//
//	fake := kctltest.NewFake()
//	widgets := kctltest.FakeClientIn(t, fake, &Widget{...})
//	configMaps := kctltest.FakeClientIn[corev1.ConfigMap](t, fake)
type Fake struct {
	mu      sync.Mutex
	log     *changeLog                             // the changes, for an in-memory server's watches; nil for FakeClients alone
	objs    map[fakeKey][]byte                     // the stored objects, as JSON
	applied map[fakeKey]map[string]map[string]any  // by object, then field manager: what it last applied
	owners  map[fakeKey]map[string]map[string]bool // by object, then field path (see leaves): its managers ("" for writes not by Apply)
	rv      int64                                  // the last resourceVersion given
}

// fakeResource is what the store's writes need to know of one resource:
// the part of a FakeClient that is not its Go type, which the in-memory
// server (StartInMemory) shares.
type fakeResource struct {
	res       kctl.Resource
	hasStatus bool           // the status subresource is modelled
	builtin   bool           // a k8s.io/api type: Update without resourceVersion is allowed
	typ       reflect.Type   // the Go type objects are normalized by (see normal); nil: none known
	schema    map[string]any // without typ: a CRD's OpenAPI v3 schema, which prunes unknown fields (see prune); nil: none
	store     *Fake
	// initial, if set, sets what the server sets on a new object (a
	// Namespace's phase), after Create dropped the status.
	initial func(doc map[string]any)
}

// newFakeResource describes res, whose objects are of Go type typ (nil:
// unknown, as for a CRD from YAML: a status subresource is assumed), in
// store.
func newFakeResource(store *Fake, res kctl.Resource, typ reflect.Type) fakeResource {
	f := fakeResource{res: res, store: store, typ: typ, hasStatus: true}
	if typ != nil {
		f.hasStatus = hasJSONField(typ, "status")
		f.builtin = strings.HasPrefix(typ.PkgPath(), "k8s.io/api/")
	}
	return f
}

// fakeKey names one object of one resource.
type fakeKey struct {
	resource string // plural.group
	types.NamespacedName
}

// NewFake returns an empty Fake.
func NewFake() *Fake {
	return &Fake{objs: map[fakeKey][]byte{}, applied: map[fakeKey]map[string]map[string]any{}, owners: map[fakeKey]map[string]map[string]bool{}}
}

// NewFakeClient returns a FakeClient of a Fake of its own, holding objs,
// created as by Create. T must have a Resource (kctl.ResourceOf); any error
// fails t.
func NewFakeClient[T any, PT kctl.Object[T]](t TB, objs ...*T) *FakeClient[T] {
	t.Helper()
	return FakeClientIn[T, PT](t, NewFake(), objs...)
}

// FakeClientIn returns a FakeClient of T whose objects are in fake, which
// other FakeClients may share, and creates objs in it as by Create. T must
// have a Resource (kctl.ResourceOf); any error fails t.
func FakeClientIn[T any, PT kctl.Object[T]](t TB, fake *Fake, objs ...*T) *FakeClient[T] {
	t.Helper()
	res, err := kctl.ResourceOf[T]()
	if err != nil {
		t.Fatalf("kctltest: NewFakeClient: %v", err)
	}
	f := &FakeClient[T]{fakeResource: newFakeResource(fake, res, reflect.TypeFor[T]()), t: t}
	for _, obj := range objs {
		if err := f.Create(t.Context(), obj); err != nil {
			t.Fatalf("kctltest: NewFakeClient: %v", err)
		}
	}
	return f
}

// verbs are the verbs InjectError knows.
var verbs = []string{"get", "list", "create", "update", "patch", "apply", "delete"}

// InjectError makes every later call of verb ("get", "list", "create",
// "update" (UpdateStatus too), "patch", "apply" or "delete") call fail
// with the namespace and name the call is about ("" for a List's name);
// when fail returns an error, the call returns it and changes nothing. A nil
// fail removes it. An unknown verb fails the test.
//
//	widgets.InjectError("update", func(ns, name string) error {
//		return apierrors.NewConflict(schema.GroupResource{Resource: "widgets"}, name, errors.New("injected"))
//	})
func (f *FakeClient[T]) InjectError(verb string, fail func(namespace, name string) error) {
	if !slices.Contains(verbs, verb) {
		f.t.Errorf("kctltest: FakeClient[%s].InjectError: no verb %q: use one of %v", f.res.Kind, verb, verbs)
		return
	}
	f.injectMu.Lock()
	defer f.injectMu.Unlock()
	if f.inject == nil {
		f.inject = map[string]func(string, string) error{}
	}
	f.inject[verb] = fail
}

// injected returns the error InjectError set up for verb on namespace/name.
func (f *FakeClient[T]) injected(verb, namespace, name string) error {
	f.injectMu.Lock()
	fail := f.inject[verb]
	f.injectMu.Unlock()
	if fail == nil {
		return nil
	}
	return fail(namespace, name)
}

// key is the store's key of the object namespace/name of the resource.
func (f *fakeResource) key(namespace, name string) fakeKey {
	return fakeKey{resource: f.res.Plural + "." + f.res.Group, NamespacedName: types.NamespacedName{Namespace: namespace, Name: name}}
}

func hasJSONField(t reflect.Type, name string) bool {
	for f := range t.Fields() {
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == name {
			return true
		}
	}
	return false
}

// Get returns a copy of the object namespace/name, or NotFound.
func (f *FakeClient[T]) Get(ctx context.Context, namespace, name string) (*T, error) {
	if err := f.injected("get", namespace, name); err != nil {
		return nil, err
	}
	f.store.mu.Lock()
	defer f.store.mu.Unlock()
	b, ok := f.store.objs[f.key(namespace, name)]
	if !ok {
		return nil, f.notFound(name)
	}
	return f.decode(b)
}

// List returns copies of the objects opts selects, sorted by namespace and
// name. A field selector may only use metadata.name and metadata.namespace.
func (f *FakeClient[T]) List(ctx context.Context, opts kctl.ListOptions) ([]*T, error) {
	if err := f.injected("list", opts.Namespace, ""); err != nil {
		return nil, err
	}
	sel := fields.Everything()
	if opts.Fields != "" {
		var err error
		sel, err = fields.ParseSelector(opts.Fields)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
	}
	for _, r := range sel.Requirements() {
		if r.Field != "metadata.name" && r.Field != "metadata.namespace" {
			return nil, fmt.Errorf("kctltest: FakeClient[%s] models field selectors on metadata.name and metadata.namespace only, not %q: test it with Start",
				f.res.Kind, r.Field)
		}
	}
	f.store.mu.Lock()
	defer f.store.mu.Unlock()
	var keys []fakeKey
	for k := range f.store.objs {
		if k.resource == f.key("", "").resource {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b fakeKey) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	var out []*T
	for _, k := range keys {
		obj, err := f.decode(f.store.objs[k])
		if err != nil {
			return nil, err
		}
		m := any(obj).(metav1.Object)
		if opts.Namespace != "" && k.Namespace != opts.Namespace {
			continue
		}
		if opts.Labels != nil && !opts.Labels.Matches(labels.Set(m.GetLabels())) {
			continue
		}
		if !sel.Matches(fields.Set{"metadata.name": k.Name, "metadata.namespace": k.Namespace}) {
			continue
		}
		out = append(out, obj)
	}
	return out, nil
}

// Create stores obj and updates obj from the stored copy.
func (f *FakeClient[T]) Create(ctx context.Context, obj *T) error {
	m := any(obj).(metav1.Object)
	if err := f.injected("create", m.GetNamespace(), m.GetName()); err != nil {
		return err
	}
	doc, err := toMap(obj)
	if err != nil {
		return err
	}
	f.store.mu.Lock()
	defer f.store.mu.Unlock()
	b, err := f.createLocked(doc, "")
	if err != nil {
		return err
	}
	return into(b, obj)
}

// createLocked stores doc as a new object written by manager and returns
// the stored object.
func (f *fakeResource) createLocked(doc map[string]any, manager string) ([]byte, error) {
	meta := metadata(doc)
	name, _ := meta["name"].(string)
	generateName, _ := meta["generateName"].(string)
	namespace, _ := meta["namespace"].(string)
	rv, _ := meta["resourceVersion"].(string)
	if name == "" && generateName != "" {
		name = generateName + strings.ToLower(rand.Text()[:5])
	}
	switch {
	case name == "":
		return nil, apierrors.NewInvalid(f.groupKind(), "", field.ErrorList{field.Required(field.NewPath("metadata", "name"), "name or generateName is required")})
	case f.res.Namespaced && namespace == "":
		return nil, apierrors.NewBadRequest(fmt.Sprintf("a %s needs a namespace", f.res.Kind))
	case rv != "":
		// The API server answers 500 with no reason: its storage layer refuses it.
		return nil, &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError,
			Message: "resourceVersion should not be set on objects to be created"}}
	}
	key := f.key(namespace, name)
	if _, ok := f.store.objs[key]; ok {
		return nil, apierrors.NewAlreadyExists(f.groupResource(), name)
	}
	meta["name"] = name
	meta["uid"] = strings.ToLower(rand.Text())
	meta["creationTimestamp"] = time.Now().UTC().Format(time.RFC3339)
	meta["generation"] = 1
	delete(meta, "deletionTimestamp")
	if f.hasStatus {
		delete(doc, "status") // written through the status subresource only
	}
	if f.initial != nil {
		f.initial(doc)
	}
	delete(f.store.applied, key) // a namesake deleted before
	delete(f.store.owners, key)
	return f.storeLocked(key, nil, doc, manager)
}

// Update replaces the object obj names; with a status subresource its status
// stays as stored. A stale resourceVersion fails with Conflict.
func (f *FakeClient[T]) Update(ctx context.Context, obj *T) error {
	return f.update(obj, false)
}

// UpdateStatus replaces only the status of the object obj names.
func (f *FakeClient[T]) UpdateStatus(ctx context.Context, obj *T) error {
	if !f.hasStatus {
		return f.notFound(any(obj).(metav1.Object).GetName())
	}
	return f.update(obj, true)
}

func (f *FakeClient[T]) update(obj *T, status bool) error {
	m := any(obj).(metav1.Object)
	if err := f.injected("update", m.GetNamespace(), m.GetName()); err != nil {
		return err
	}
	key := f.key(m.GetNamespace(), m.GetName())
	doc, err := toMap(obj)
	if err != nil {
		return err
	}
	f.store.mu.Lock()
	defer f.store.mu.Unlock()
	old, err := f.currentLocked(key, m.GetResourceVersion(), !f.builtin)
	if err != nil {
		return err
	}
	b, err := f.storeLocked(key, old, f.merge(old, doc, status), "")
	if err != nil {
		return err
	}
	return into(b, obj)
}

// Delete deletes the object namespace/name, or, while it has finalizers,
// sets its deletionTimestamp.
func (f *FakeClient[T]) Delete(ctx context.Context, namespace, name string) error {
	return f.DeleteWithOptions(ctx, namespace, name, kctl.DeleteOptions{})
}

// DeleteWithOptions deletes the object namespace/name as Delete does, with
// opts' preconditions: an object whose UID or ResourceVersion is not the
// one given is not deleted, and the error is the API server's Conflict.
// The fake has no garbage collector, which alone completes a Foreground
// or Orphan propagation: those are an error naming StartInMemory, which
// has one. GracePeriodSeconds changes nothing (no kubelet waits).
func (f *FakeClient[T]) DeleteWithOptions(ctx context.Context, namespace, name string, opts kctl.DeleteOptions) error {
	if err := f.injected("delete", namespace, name); err != nil {
		return err
	}
	if p := opts.Propagation; p == metav1.DeletePropagationForeground || p == metav1.DeletePropagationOrphan {
		return fmt.Errorf("kctltest: FakeClient[%s] has no garbage collector to complete a %s deletion: test it with StartInMemory",
			f.res.Kind, p)
	}
	key := f.key(namespace, name)
	f.store.mu.Lock()
	defer f.store.mu.Unlock()
	old, err := f.currentLocked(key, "", false)
	if err != nil {
		return err
	}
	meta := metadata(clone(old))
	if err := f.preconditionFailed(name, meta, preconditions(opts)); err != nil {
		return err
	}
	if fin, _ := meta["finalizers"].([]any); len(fin) == 0 {
		f.forgetLocked(key)
		return nil
	}
	if meta["deletionTimestamp"] != nil {
		return nil
	}
	next := clone(old)
	meta = metadata(next)
	meta["deletionTimestamp"] = time.Now().UTC().Format(time.RFC3339)
	gen, _ := meta["generation"].(float64)
	meta["generation"] = gen + 1 // as the API server does
	_, err = f.storeLocked(key, old, next, "")
	return err
}

// DeleteAllOf deletes every object that opts selects, each as
// DeleteWithOptions does with del, as kctl.Client's one deletecollection
// request does. For a namespaced type opts.Namespace is required.
func (f *FakeClient[T]) DeleteAllOf(ctx context.Context, opts kctl.ListOptions, del kctl.DeleteOptions) error {
	if f.res.Namespaced && opts.Namespace == "" {
		return fmt.Errorf("kctl: delete all of %s: %s are namespaced; give a namespace", f.res, f.res.Plural)
	}
	objs, err := f.List(ctx, opts)
	if err != nil {
		return err
	}
	for _, obj := range objs {
		m := any(obj).(metav1.Object)
		err := f.DeleteWithOptions(ctx, m.GetNamespace(), m.GetName(), del)
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// preconditions is opts' preconditions as a delete request sends them.
func preconditions(opts kctl.DeleteOptions) *metav1.Preconditions {
	if opts.UID == "" && opts.ResourceVersion == "" {
		return nil
	}
	p := &metav1.Preconditions{}
	if opts.UID != "" {
		p.UID = &opts.UID
	}
	if opts.ResourceVersion != "" {
		p.ResourceVersion = &opts.ResourceVersion
	}
	return p
}

// preconditionFailed is the API server's Conflict for a delete of the
// object name, whose metadata is meta, when it does not meet p; nil when
// it does.
func (f *fakeResource) preconditionFailed(name string, meta map[string]any, p *metav1.Preconditions) error {
	if p == nil {
		return nil
	}
	uid, _ := meta["uid"].(string)
	rv, _ := meta["resourceVersion"].(string)
	switch {
	case p.UID != nil && string(*p.UID) != uid:
		return apierrors.NewConflict(f.groupResource(), name,
			fmt.Errorf("Precondition failed: UID in precondition: %s, UID in object meta: %s", *p.UID, uid))
	case p.ResourceVersion != nil && *p.ResourceVersion != rv:
		return apierrors.NewConflict(f.groupResource(), name,
			fmt.Errorf("Precondition failed: ResourceVersion in precondition: %s, ResourceVersion in object meta: %s", *p.ResourceVersion, rv))
	}
	return nil
}

// forgetLocked deletes the object key and what the store knows of it.
func (f *fakeResource) forgetLocked(key fakeKey) {
	if b, ok := f.store.objs[key]; ok {
		f.store.recordDeleted(key, b)
	}
	delete(f.store.objs, key)
	delete(f.store.applied, key)
	delete(f.store.owners, key)
}
