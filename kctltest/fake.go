package kctltest

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kctl-dev/kctl"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// FakeClient holds objects of one type in memory and has the methods of
// kctl.Client[T] that a reconcile function mostly calls, with the same
// signatures: Get, List, Create, Update, UpdateStatus, Patch and Delete. It
// is for plain unit tests of a reconcile function that reads and writes
// through a small interface of its own, which both satisfy:
//
//	type widgetClient interface {
//		Get(ctx context.Context, namespace, name string) (*Widget, error)
//		UpdateStatus(ctx context.Context, w *Widget) error
//	}
//
//	func reconcile(widgets widgetClient) func(context.Context, *Widget) (kctl.Result, error) { ... }
//
// and in main.go reconcile(kctl.ClientFor[Widget](mgr)), in the unit test
// reconcile(kctltest.NewFakeClient(t, &Widget{...})).
//
// What it models, as the API server does: resourceVersion (a write with a
// stale one fails with Conflict; Create refuses one, with the server's 500;
// Update of a non-k8s.io/api type needs one), uid, creationTimestamp,
// generation (bumped when anything but metadata and status changes, and by a
// Delete that sets deletionTimestamp), the status subresource of a type with a status field
// (Create drops the status, Update keeps the stored one, UpdateStatus changes
// only the status), merge patches (RFC 7386), deletion with
// finalizers (Delete sets deletionTimestamp; the object goes when the last
// finalizer is removed), generateName, label selectors and field selectors on
// metadata.name and metadata.namespace. Errors are the API server's
// (apierrors.IsNotFound, IsConflict, IsAlreadyExists work).
//
// What it does not model: admission and validation (a write the server would
// reject succeeds), defaulting, garbage collection (deleting an owner leaves
// its children), server-side apply, strategic merge and JSON patches (Patch
// and Apply return an error), watches, caches and their staleness, and
// other types (each FakeClient is on its own). Test those against a real API
// server with Start. A FakeClient is safe for concurrent use.
type FakeClient[T any] struct {
	res       kctl.Resource
	hasStatus bool // T has a status field: the status subresource is modelled
	builtin   bool // T is a k8s.io/api type: Update without resourceVersion is allowed

	mu   sync.Mutex
	objs map[types.NamespacedName][]byte // the stored objects, as JSON
	rv   int64                           // the last resourceVersion given
}

// NewFakeClient returns a FakeClient holding objs, created as by Create. T
// must have a Resource (kctl.ResourceOf); any error fails t.
func NewFakeClient[T any, PT kctl.Object[T]](t TB, objs ...*T) *FakeClient[T] {
	t.Helper()
	res, err := kctl.ResourceOf[T]()
	if err != nil {
		t.Fatalf("kctltest: NewFakeClient: %v", err)
	}
	rt := reflect.TypeFor[T]()
	f := &FakeClient[T]{res: res, objs: map[types.NamespacedName][]byte{},
		hasStatus: hasJSONField(rt, "status"), builtin: strings.HasPrefix(rt.PkgPath(), "k8s.io/api/")}
	for _, obj := range objs {
		if err := f.Create(t.Context(), obj); err != nil {
			t.Fatalf("kctltest: NewFakeClient: %v", err)
		}
	}
	return f
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
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.objs[types.NamespacedName{Namespace: namespace, Name: name}]
	if !ok {
		return nil, f.notFound(name)
	}
	return f.decode(b)
}

// List returns copies of the objects opts selects, sorted by namespace and
// name. A field selector may only use metadata.name and metadata.namespace.
func (f *FakeClient[T]) List(ctx context.Context, opts kctl.ListOptions) ([]*T, error) {
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
	f.mu.Lock()
	defer f.mu.Unlock()
	keys := make([]types.NamespacedName, 0, len(f.objs))
	for k := range f.objs {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b types.NamespacedName) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	var out []*T
	for _, k := range keys {
		obj, err := f.decode(f.objs[k])
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
	name := m.GetName()
	if name == "" && m.GetGenerateName() != "" {
		name = m.GetGenerateName() + strings.ToLower(rand.Text()[:5])
	}
	switch {
	case name == "":
		return apierrors.NewInvalid(f.groupKind(), "", nil)
	case f.res.Namespaced && m.GetNamespace() == "":
		return apierrors.NewBadRequest(fmt.Sprintf("a %s needs a namespace", f.res.Kind))
	case m.GetResourceVersion() != "":
		// The API server answers 500 with no reason: its storage layer refuses it.
		return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError,
			Message: "resourceVersion should not be set on objects to be created"}}
	}
	doc, err := toMap(obj)
	if err != nil {
		return err
	}
	key := types.NamespacedName{Namespace: m.GetNamespace(), Name: name}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.objs[key]; ok {
		return apierrors.NewAlreadyExists(f.groupResource(), name)
	}
	meta := metadata(doc)
	meta["name"] = name
	meta["uid"] = strings.ToLower(rand.Text())
	meta["creationTimestamp"] = time.Now().UTC().Format(time.RFC3339)
	meta["generation"] = 1
	delete(meta, "deletionTimestamp")
	if f.hasStatus {
		delete(doc, "status") // written through the status subresource only
	}
	return f.storeLocked(key, doc, obj)
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
	key := types.NamespacedName{Namespace: m.GetNamespace(), Name: m.GetName()}
	doc, err := toMap(obj)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	old, err := f.currentLocked(key, m.GetResourceVersion(), !f.builtin)
	if err != nil {
		return err
	}
	return f.storeLocked(key, f.merge(old, doc, status), obj)
}

// Patch applies a merge patch (kctl.MergePatch, RFC 7386) to the object
// named by obj's namespace and name, or to its status with opts.Subresource
// "status", and updates obj from the result, as kctl.Client.Patch does. A
// metadata.resourceVersion in the patch is a precondition. Other patch types
// return an error: test them with Start.
func (f *FakeClient[T]) Patch(ctx context.Context, obj *T, typ kctl.PatchType, data []byte, opts kctl.PatchOptions) error {
	m := any(obj).(metav1.Object)
	out, err := f.patch(m.GetNamespace(), m.GetName(), typ, data, opts)
	if err != nil {
		return err
	}
	*obj = *out
	return nil
}

// patch is Patch of the object namespace/name, returning the result.
func (f *FakeClient[T]) patch(namespace, name string, typ kctl.PatchType, data []byte, opts kctl.PatchOptions) (*T, error) {
	if typ != kctl.MergePatch {
		return nil, fmt.Errorf("kctltest: FakeClient[%s].Patch models merge patches only, not %s: test it with Start", f.res.Kind, typ)
	}
	var patch map[string]any
	if err := json.Unmarshal(data, &patch); err != nil {
		return nil, apierrors.NewBadRequest("the patch is not a JSON object: " + err.Error())
	}
	rv, _ := metadata(patch)["resourceVersion"].(string)
	key := types.NamespacedName{Namespace: namespace, Name: name}
	f.mu.Lock()
	defer f.mu.Unlock()
	old, err := f.currentLocked(key, rv, false)
	if err != nil {
		return nil, err
	}
	status := opts.Subresource == "status"
	if status && !f.hasStatus {
		return nil, f.notFound(name)
	}
	next := mergePatch(clone(old), patch).(map[string]any)
	out := new(T)
	if err := f.storeLocked(key, f.merge(old, next, status), out); err != nil {
		return nil, err
	}
	return out, nil
}

// Apply is not modelled: it returns an error saying to use Start.
func (f *FakeClient[T]) Apply(ctx context.Context, obj *T, opts kctl.PatchOptions) error {
	return fmt.Errorf("kctltest: FakeClient[%s] does not model server-side apply: test it with Start", f.res.Kind)
}

// Delete deletes the object namespace/name, or, while it has finalizers,
// sets its deletionTimestamp.
func (f *FakeClient[T]) Delete(ctx context.Context, namespace, name string) error {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	f.mu.Lock()
	defer f.mu.Unlock()
	old, err := f.currentLocked(key, "", false)
	if err != nil {
		return err
	}
	meta := metadata(old)
	if fin, _ := meta["finalizers"].([]any); len(fin) == 0 {
		delete(f.objs, key)
		return nil
	}
	if meta["deletionTimestamp"] != nil {
		return nil
	}
	meta["deletionTimestamp"] = time.Now().UTC().Format(time.RFC3339)
	gen, _ := meta["generation"].(float64)
	meta["generation"] = gen + 1 // as the API server does
	return f.storeLocked(key, old, new(T))
}

// currentLocked returns the stored object key as a map. rv, unless "", must
// be its resourceVersion; needRV makes "" an error.
func (f *FakeClient[T]) currentLocked(key types.NamespacedName, rv string, needRV bool) (map[string]any, error) {
	b, ok := f.objs[key]
	if !ok {
		return nil, f.notFound(key.Name)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	stored, _ := metadata(doc)["resourceVersion"].(string)
	switch {
	case rv == "" && needRV:
		return nil, apierrors.NewInvalid(f.groupKind(), key.Name, nil)
	case rv != "" && rv != stored:
		return nil, apierrors.NewConflict(f.groupResource(), key.Name,
			errors.New("the object has been modified; please apply your changes to the latest version and try again"))
	}
	return doc, nil
}

// merge returns what a write of next over old stores: with status, old with
// next's status; else next with old's status (if modelled) and old's
// server-owned metadata, and generation bumped if the rest changed.
func (f *FakeClient[T]) merge(old, next map[string]any, status bool) map[string]any {
	if status {
		out := clone(old)
		out["status"] = next["status"]
		return out
	}
	out := clone(next)
	if f.hasStatus {
		out["status"] = old["status"]
	}
	meta := metadata(out)
	oldMeta := metadata(old)
	for _, k := range []string{"uid", "creationTimestamp", "generation", "deletionTimestamp", "namespace", "name"} {
		meta[k] = oldMeta[k]
	}
	if !reflect.DeepEqual(spec(old), spec(out)) {
		gen, _ := oldMeta["generation"].(float64)
		meta["generation"] = gen + 1
	}
	return out
}

// storeLocked gives doc a new resourceVersion and stores it under key (or
// deletes it, if it is being deleted and has no finalizer left), and
// decodes it into obj.
func (f *FakeClient[T]) storeLocked(key types.NamespacedName, doc map[string]any, obj *T) error {
	f.rv++
	meta := metadata(doc)
	meta["resourceVersion"] = strconv.FormatInt(f.rv, 10)
	doc["apiVersion"] = f.res.APIVersion()
	doc["kind"] = f.res.Kind
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	fin, _ := meta["finalizers"].([]any)
	if meta["deletionTimestamp"] != nil && len(fin) == 0 {
		delete(f.objs, key)
	} else {
		f.objs[key] = b
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		return err
	}
	*obj = out
	return nil
}

func (f *FakeClient[T]) decode(b []byte) (*T, error) {
	obj := new(T)
	return obj, json.Unmarshal(b, obj)
}

func (f *FakeClient[T]) groupResource() schema.GroupResource {
	return schema.GroupResource{Group: f.res.Group, Resource: f.res.Plural}
}

func (f *FakeClient[T]) groupKind() schema.GroupKind {
	return schema.GroupKind{Group: f.res.Group, Kind: f.res.Kind}
}

func (f *FakeClient[T]) notFound(name string) error {
	return apierrors.NewNotFound(f.groupResource(), name)
}

func toMap(obj any) (map[string]any, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	return doc, json.Unmarshal(b, &doc)
}

// metadata returns doc's metadata map, adding an empty one if it has none.
func metadata(doc map[string]any) map[string]any {
	meta, ok := doc["metadata"].(map[string]any)
	if !ok {
		meta = map[string]any{}
		doc["metadata"] = meta
	}
	return meta
}

// spec is everything generation tracks: all but metadata and status.
func spec(doc map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range doc {
		if k != "metadata" && k != "status" && k != "apiVersion" && k != "kind" {
			out[k] = v
		}
	}
	return out
}

func clone(doc map[string]any) map[string]any {
	b, _ := json.Marshal(doc) // decoded JSON: cannot fail
	var out map[string]any
	json.Unmarshal(b, &out)
	return out
}

// mergePatch applies an RFC 7386 merge patch to target.
func mergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
		} else {
			t[k] = mergePatch(t[k], v)
		}
	}
	return t
}
