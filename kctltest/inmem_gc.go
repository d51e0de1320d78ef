package kctltest

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
)

// Deletion, garbage collection and namespace deletion, as kube-apiserver,
// kube-controller-manager's garbage collector and its namespace controller
// do them together, but at once: by the time a delete is answered, its
// cascade has run as far as finalizers let it.

const (
	foregroundFinalizer = metav1.FinalizerDeleteDependents // "foregroundDeletion"
	orphanFinalizer     = metav1.FinalizerOrphanDependents // "orphan"
)

// delete answers a delete, or a deletecollection.
func (s *memServer) delete(w http.ResponseWriter, r *http.Request, c call) {
	var opts metav1.DeleteOptions
	b, _ := io.ReadAll(r.Body)
	if len(b) > 0 {
		if err := json.Unmarshal(b, &opts); err != nil {
			s.fail(w, apierrors.NewBadRequest("the body is not DeleteOptions: "+err.Error()))
			return
		}
	}
	if c.verb == "deletecollection" {
		sel, err := selectorOf(c, r.URL.Query())
		if err != nil {
			s.fail(w, err)
			return
		}
		s.fake.mu.Lock()
		for _, k := range s.sortedKeysLocked(sel) {
			s.deleteLocked(k, c.res, opts)
		}
		s.changedLocked(c)
		s.fake.mu.Unlock()
		writeJSON(w, http.StatusOK, metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess})
		return
	}
	s.fake.mu.Lock()
	b, gone, err := s.deleteLocked(c.key(), c.res, opts)
	s.changedLocked(c)
	s.fake.mu.Unlock()
	switch {
	case err != nil:
		s.fail(w, err)
	case gone:
		var m struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		json.Unmarshal(b, &m) // stored JSON
		writeJSON(w, http.StatusOK, metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess,
			Details: &metav1.StatusDetails{Name: c.name, Group: c.res.res.Group, Kind: c.res.res.Plural, UID: m.Metadata.UID}})
	default:
		s.answer(w, r, c, http.StatusOK, b)
	}
}

// deleteLocked deletes the object key of res as opts say: at once if it
// has no finalizers, else it gets a deletionTimestamp (and the finalizer
// of a foreground or orphan propagation). It returns the object, and
// whether it is gone. The caller holds s.fake.mu and then runs
// collectLocked.
func (s *memServer) deleteLocked(key fakeKey, res *memResource, opts metav1.DeleteOptions) ([]byte, bool, error) {
	f := s.fakeOf(res)
	if m, ok := s.fake.log.metas[key]; ok && len(m.Finalizers) == 0 && opts.Preconditions == nil && opts.PropagationPolicy == nil &&
		opts.OrphanDependents == nil && key.resource != "namespaces." {
		b := s.fake.objs[key] // the common case, decided from the index: gone at once
		f.forgetLocked(key)
		return b, true, nil
	}
	old, err := f.currentLocked(key, "", false)
	if err != nil {
		return nil, false, err
	}
	meta := metadata(old)
	if err := f.preconditionFailed(key.Name, meta, opts.Preconditions); err != nil {
		return nil, false, err
	}
	next := clone(old)
	meta = metadata(next)
	if res.res.Group == "" && res.res.Kind == "Namespace" {
		if meta["deletionTimestamp"] == nil {
			meta["deletionTimestamp"] = time.Now().UTC().Format(time.RFC3339)
			status, _ := next["status"].(map[string]any)
			if status == nil {
				status = map[string]any{}
			}
			status["phase"] = "Terminating"
			next["status"] = status
		}
		b, err := f.storeLocked(key, old, next, "")
		return b, false, err
	}
	fin, _ := meta["finalizers"].([]any)
	switch {
	case opts.PropagationPolicy != nil && *opts.PropagationPolicy == metav1.DeletePropagationForeground:
		fin = addFinalizer(fin, foregroundFinalizer)
	case opts.PropagationPolicy != nil && *opts.PropagationPolicy == metav1.DeletePropagationOrphan,
		opts.OrphanDependents != nil && *opts.OrphanDependents:
		fin = addFinalizer(fin, orphanFinalizer)
	}
	if len(fin) == 0 {
		b := s.fake.objs[key] // old, as stored
		f.forgetLocked(key)
		return b, true, nil
	}
	meta["finalizers"] = fin
	if meta["deletionTimestamp"] == nil {
		meta["deletionTimestamp"] = time.Now().UTC().Format(time.RFC3339)
		meta["deletionGracePeriodSeconds"] = 0
		gen, _ := meta["generation"].(float64)
		meta["generation"] = gen + 1 // as the API server does
	}
	b, err := f.storeLocked(key, old, next, "")
	return b, false, err
}

func addFinalizer(fin []any, name string) []any {
	if slices.Contains(fin, any(name)) {
		return fin
	}
	return append(fin, name)
}

// collectLocked is the garbage collector and the namespace controller:
// it looks at each object whose state, owner or namespace changed since
// it last ran, until nothing more changes. The caller holds s.fake.mu.
func (s *memServer) collectLocked() {
	l := s.fake.log
	for range 1_000_000 {
		var key fakeKey
		found := false
		for k := range l.dirty {
			key = k
			found = true
			break
		}
		if !found {
			return
		}
		delete(l.dirty, key)
		m, ok := l.metas[key]
		if !ok {
			continue // gone: index marked its children
		}
		res := s.resourceOfKeyLocked(key.resource)
		if res == nil {
			continue
		}
		deleting := m.DeletionTimestamp != nil
		switch {
		case key.resource == "namespaces." && deleting:
			s.emptyNamespaceLocked(key, res)
		case deleting && slices.Contains(m.Finalizers, foregroundFinalizer):
			s.foregroundLocked(key, res, m)
		case deleting && slices.Contains(m.Finalizers, orphanFinalizer):
			s.orphanLocked(key, res, m)
		case !deleting && len(m.OwnerReferences) > 0:
			s.danglingLocked(key, res, m)
		}
	}
}

// emptyNamespaceLocked deletes the objects of a namespace being deleted,
// and the namespace once none is left.
func (s *memServer) emptyNamespaceLocked(ns fakeKey, res *memResource) {
	left := false
	for k := range s.fake.log.metas {
		if k.Namespace != ns.Name {
			continue
		}
		left = true
		if s.fake.log.metas[k].DeletionTimestamp == nil {
			if r := s.resourceOfKeyLocked(k.resource); r != nil {
				s.deleteLocked(k, r, metav1.DeleteOptions{})
			}
		}
	}
	if !left {
		f := s.fakeOf(res)
		old, err := f.currentLocked(ns, "", false)
		if err != nil {
			return
		}
		next := clone(old)
		delete(next, "spec") // its finalizer "kubernetes", and so the namespace
		f.storeLocked(ns, old, next, "")
	}
}

// foregroundLocked deletes the children of an object deleted in the
// foreground, and removes its finalizer once none that blocks is left.
func (s *memServer) foregroundLocked(key fakeKey, res *memResource, m objMeta) {
	blocked := false
	for child := range s.fake.log.children[m.UID] {
		cm := s.fake.log.metas[child]
		for _, ref := range cm.OwnerReferences {
			if string(ref.UID) == m.UID && ref.BlockOwnerDeletion != nil && *ref.BlockOwnerDeletion {
				blocked = true
			}
		}
		if cm.DeletionTimestamp == nil {
			if r := s.resourceOfKeyLocked(child.resource); r != nil {
				policy := metav1.DeletePropagationForeground
				s.deleteLocked(child, r, metav1.DeleteOptions{PropagationPolicy: &policy})
			}
		}
	}
	if !blocked || len(s.fake.log.children[m.UID]) == 0 {
		s.dropFinalizerLocked(key, res, foregroundFinalizer)
	}
}

// orphanLocked removes the owner references to an object deleted with
// orphan propagation, then its finalizer.
func (s *memServer) orphanLocked(key fakeKey, res *memResource, m objMeta) {
	for child := range s.fake.log.children[m.UID] {
		s.dropOwnersLocked(child, map[string]bool{m.UID: true})
	}
	s.dropFinalizerLocked(key, res, orphanFinalizer)
}

// danglingLocked deletes an object whose owners are all gone, in the
// background, or removes the references to those gone when some are left.
func (s *memServer) danglingLocked(key fakeKey, res *memResource, m objMeta) {
	gone := map[string]bool{}
	for _, ref := range m.OwnerReferences {
		if _, ok := s.fake.log.byUID[string(ref.UID)]; !ok {
			gone[string(ref.UID)] = true
		}
	}
	switch {
	case len(gone) == 0:
	case len(gone) == len(m.OwnerReferences):
		s.deleteLocked(key, res, metav1.DeleteOptions{})
	default:
		s.dropOwnersLocked(key, gone)
	}
}

// dropOwnersLocked removes the owner references to the uids of drop from key.
func (s *memServer) dropOwnersLocked(key fakeKey, drop map[string]bool) {
	res := s.resourceOfKeyLocked(key.resource)
	if res == nil {
		return
	}
	s.editLocked(key, res, func(meta map[string]any) {
		refs, _ := meta["ownerReferences"].([]any)
		refs = slices.DeleteFunc(slices.Clone(refs), func(r any) bool {
			m, _ := r.(map[string]any)
			uid, _ := m["uid"].(string)
			return drop[uid]
		})
		if len(refs) == 0 {
			delete(meta, "ownerReferences")
		} else {
			meta["ownerReferences"] = refs
		}
	})
}

// dropFinalizerLocked removes the finalizer name from key: the object goes
// if it was the last.
func (s *memServer) dropFinalizerLocked(key fakeKey, res *memResource, name string) {
	s.editLocked(key, res, func(meta map[string]any) {
		fin, _ := meta["finalizers"].([]any)
		fin = slices.DeleteFunc(slices.Clone(fin), func(f any) bool { return f == name })
		if len(fin) == 0 {
			delete(meta, "finalizers")
		} else {
			meta["finalizers"] = fin
		}
	})
}

// editLocked stores key with its metadata changed by edit.
func (s *memServer) editLocked(key fakeKey, res *memResource, edit func(meta map[string]any)) {
	f := s.fakeOf(res)
	old, err := f.currentLocked(key, "", false)
	if err != nil {
		return
	}
	next := clone(old)
	edit(metadata(next))
	f.storeLocked(key, old, next, "")
}

// resourceOfKeyLocked is the resource of the store's key resource
// ("plural.group"), in any version. The caller holds s.fake.mu.
func (s *memServer) resourceOfKeyLocked(name string) *memResource {
	if r, ok := s.byStoreKey()[name]; ok {
		return r
	}
	for _, byPlural := range s.customResourcesLocked() {
		for _, r := range byPlural {
			if r.res.Plural+"."+r.res.Group == name {
				return r
			}
		}
	}
	return nil
}

// byStoreKey indexes the builtins by the store's key resource, in their
// preferred version.
func (s *memServer) byStoreKey() map[string]*memResource {
	s.keysOnce.Do(func() {
		s.keys = map[string]*memResource{}
		for _, byPlural := range builtins() {
			for _, r := range byPlural {
				k := r.res.Plural + "." + r.res.Group
				if had, ok := s.keys[k]; !ok || version.CompareKubeAwareVersionStrings(r.res.Version, had.res.Version) > 0 {
					s.keys[k] = r
				}
			}
		}
	})
	return s.keys
}
