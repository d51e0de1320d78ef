package kctltest

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/kctl-dev/kctl"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// key is the store's key of c's object.
func (c call) key() fakeKey {
	return fakeKey{resource: c.res.res.Plural + "." + c.res.res.Group, NamespacedName: types.NamespacedName{Namespace: c.namespace, Name: c.name}}
}

// answer writes a stored object, b, with code, encoded as r asks.
func (s *memServer) answer(w http.ResponseWriter, r *http.Request, c call, code int, b []byte) {
	e := encodingOf(r, c.res, &s.memo)
	out, err := e.object(c.res, b)
	if err != nil {
		s.fail(w, err)
		return
	}
	w.Header().Set("Content-Type", e.contentType())
	w.WriteHeader(code)
	w.Write(out)
}

func (s *memServer) get(w http.ResponseWriter, r *http.Request, c call) {
	s.fake.mu.Lock()
	b, ok := s.fake.objs[c.key()]
	s.fake.mu.Unlock()
	if !ok {
		s.fail(w, apierrors.NewNotFound(schema.GroupResource{Group: c.res.res.Group, Resource: c.res.res.Plural}, c.name))
		return
	}
	s.answer(w, r, c, http.StatusOK, b)
}

// selector is what a list or watch selects: a namespace ("" all), labels
// and fields.
type selector struct {
	namespace string
	labels    labels.Selector
	fields    fields.Selector
	res       *memResource
}

// selectorOf reads c's namespace and q's selectors, refusing a field the
// resource is not filtered by, as the API server does.
func selectorOf(c call, q url.Values) (selector, error) {
	sel := selector{namespace: c.namespace, labels: labels.Everything(), fields: fields.Everything(), res: c.res}
	var err error
	if ls := q.Get("labelSelector"); ls != "" {
		sel.labels, err = labels.Parse(ls)
		if err != nil {
			return sel, apierrors.NewBadRequest(err.Error())
		}
	}
	if fs := q.Get("fieldSelector"); fs != "" {
		sel.fields, err = fields.ParseSelector(fs)
		if err != nil {
			return sel, apierrors.NewBadRequest(err.Error())
		}
	}
	for _, r := range sel.fields.Requirements() {
		if slices.Contains(c.res.fields, r.Field) {
			continue
		}
		if c.res.typ == nil {
			quoted := make([]string, len(c.res.fields))
			for i, f := range c.res.fields {
				quoted[i] = strconv.Quote(f)
			}
			return sel, apierrors.NewBadRequest(fmt.Sprintf("%q is not a known field selector: only %s", r.Field, strings.Join(quoted, ", ")))
		}
		return sel, apierrors.NewBadRequest("field label not supported: " + r.Field)
	}
	return sel, nil
}

// matches tells whether the stored object key, b, is selected.
func (sel selector) matches(key fakeKey, b []byte) bool {
	if key.resource != sel.res.res.Plural+"."+sel.res.res.Group || sel.namespace != "" && key.Namespace != sel.namespace {
		return false
	}
	if sel.labels.Empty() && sel.fields.Empty() {
		return true
	}
	var doc map[string]any
	if json.Unmarshal(b, &doc) != nil {
		return false
	}
	ls, _ := metadata(doc)["labels"].(map[string]any)
	set := labels.Set{}
	for k, v := range ls {
		set[k], _ = v.(string)
	}
	if !sel.labels.Matches(set) {
		return false
	}
	fs := fields.Set{}
	for _, r := range sel.fields.Requirements() {
		fs[r.Field] = fieldValue(doc, r.Field)
	}
	return sel.fields.Matches(fs)
}

// fieldValue is the value of the field at a dotted path, as a field selector compares it.
func fieldValue(doc map[string]any, path string) string {
	var v any = doc
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = m[k]
	}
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

// continueToken is what a list's continue parameter carries.
type continueToken struct {
	RV   int64 `json:"rv"`
	Snap int64 `json:"snap"` // the listSnapshot the later pages read
	Next int   `json:"next"` // the index in it of the next object to look at
}

// listSnapshot is what a paged list's later pages read, as the API server
// serves them from its first page's resourceVersion: the objects of one
// resource (in one namespace, or all) as they were then, by namespace and
// name. Objects are immutable once stored, so it holds them, not copies.
type listSnapshot struct {
	resource, namespace string
	keys                []fakeKey
	objs                [][]byte
}

// keepSnapshots is how many list snapshots a server keeps: a continue
// token of an older one is 410 Gone, as one from before a compaction.
const keepSnapshots = 64

// list answers a list: sorted by namespace and name, as etcd's keys are, in
// pages of limit with a continue token; the later pages show the objects as
// they were at the first page's resourceVersion.
func (s *memServer) list(w http.ResponseWriter, r *http.Request, c call) {
	q := r.URL.Query()
	sel, err := selectorOf(c, q)
	if err != nil {
		s.fail(w, err)
		return
	}
	var tok continueToken
	if cont := q.Get("continue"); cont != "" {
		b, err := base64.RawURLEncoding.DecodeString(cont)
		if err == nil {
			err = json.Unmarshal(b, &tok)
		}
		if err != nil || tok.Snap == 0 || tok.Next < 0 {
			s.fail(w, apierrors.NewBadRequest("continue key is not valid: "+cont))
			return
		}
	}
	limit, _ := strconv.Atoi(q.Get("limit"))
	s.fake.mu.Lock()
	meta, items, err := s.pageLocked(sel, tok, limit)
	s.fake.mu.Unlock()
	if err != nil {
		s.fail(w, err)
		return
	}
	e := encodingOf(r, c.res, &s.memo)
	out, err := e.list(c.res, meta, items)
	if err != nil {
		s.fail(w, err)
		return
	}
	w.Header().Set("Content-Type", e.contentType())
	w.WriteHeader(http.StatusOK)
	w.Write(out)
}

// pageLocked returns the page of a list that tok continues (the first if
// it is zero) of at most limit objects (0: all), and its ListMeta. The
// caller holds s.fake.mu.
func (s *memServer) pageLocked(sel selector, tok continueToken, limit int) (metav1.ListMeta, [][]byte, error) {
	snap := s.snaps[tok.Snap]
	resource := sel.res.res.Plural + "." + sel.res.res.Group
	switch {
	case tok.Snap == 0:
		tok.RV = s.fake.rv
		snap = s.snapshotLocked(resource, sel.namespace)
	case tok.RV < s.fake.log.oldest || snap == nil:
		return metav1.ListMeta{}, nil, apierrors.NewResourceExpired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.")
	case snap.resource != resource || snap.namespace != sel.namespace:
		return metav1.ListMeta{}, nil, apierrors.NewBadRequest("continue key is not valid: it is of another list")
	}
	meta := metav1.ListMeta{ResourceVersion: strconv.FormatInt(tok.RV, 10)}
	var items [][]byte
	for i := tok.Next; i < len(snap.keys); i++ {
		if !sel.matches(snap.keys[i], snap.objs[i]) {
			continue
		}
		if limit > 0 && len(items) == limit {
			if tok.Snap == 0 {
				tok.Snap = s.keepSnapshotLocked(snap)
			}
			b, _ := json.Marshal(continueToken{RV: tok.RV, Snap: tok.Snap, Next: i})
			meta.Continue = base64.RawURLEncoding.EncodeToString(b)
			if sel.labels.Empty() && sel.fields.Empty() {
				rest := int64(len(snap.keys) - i)
				meta.RemainingItemCount = &rest // as etcd counts them: not with a selector
			}
			break
		}
		items = append(items, snap.objs[i])
	}
	return meta, items, nil
}

// snapshotLocked is the objects of resource in namespace ("" all) now.
// The caller holds s.fake.mu.
func (s *memServer) snapshotLocked(resource, namespace string) *listSnapshot {
	snap := &listSnapshot{resource: resource, namespace: namespace}
	for k := range s.fake.objs {
		if k.resource == resource && (namespace == "" || k.Namespace == namespace) {
			snap.keys = append(snap.keys, k)
		}
	}
	slices.SortFunc(snap.keys, func(a, b fakeKey) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	snap.objs = make([][]byte, len(snap.keys))
	for i, k := range snap.keys {
		snap.objs[i] = s.fake.objs[k]
	}
	return snap
}

// keepSnapshotLocked keeps snap for the later pages of its list, forgetting
// the oldest beyond keepSnapshots, and returns its number. The caller holds
// s.fake.mu.
func (s *memServer) keepSnapshotLocked(snap *listSnapshot) int64 {
	if s.snaps == nil {
		s.snaps = map[int64]*listSnapshot{}
	}
	s.lastSnap++
	s.snaps[s.lastSnap] = snap
	delete(s.snaps, s.lastSnap-keepSnapshots)
	return s.lastSnap
}

// sortedKeysLocked returns the keys of the objects sel selects, by
// namespace and name. The caller holds s.fake.mu.
func (s *memServer) sortedKeysLocked(sel selector) []fakeKey {
	var keys []fakeKey
	for k, b := range s.fake.objs {
		if sel.matches(k, b) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b fakeKey) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return keys
}

// write answers create, update, patch, apply, delete and deletecollection.
func (s *memServer) write(w http.ResponseWriter, r *http.Request, c call) {
	var doc map[string]any
	if c.verb == "create" || c.verb == "update" {
		var err error
		doc, err = readDoc(r, c.res)
		if err != nil {
			s.fail(w, err)
			return
		}
		meta := metadata(doc)
		ns, _ := meta["namespace"].(string)
		name, _ := meta["name"].(string)
		switch {
		case c.res.res.Namespaced && ns != "" && ns != c.namespace:
			s.fail(w, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request"))
			return
		case c.verb == "update" && name != c.name:
			s.fail(w, apierrors.NewBadRequest("the name of the object ("+name+") does not match the name on the URL ("+c.name+")"))
			return
		}
		delete(meta, "namespace")
		if c.namespace != "" {
			meta["namespace"] = c.namespace
		}
	}
	code := http.StatusOK
	var b []byte
	var err error
	switch c.verb {
	case "create":
		code = http.StatusCreated
		b, err = s.create(c, doc)
	case "update":
		b, err = s.update(c, doc)
	case "patch", "apply":
		var created bool
		b, created, err = s.patch(r, c)
		if created {
			code = http.StatusCreated
		}
	case "delete", "deletecollection":
		s.delete(w, r, c)
		return
	}
	if err != nil {
		s.fail(w, err)
		return
	}
	s.answer(w, r, c, code, b)
}

func (s *memServer) create(c call, doc map[string]any) ([]byte, error) {
	s.fake.mu.Lock()
	defer s.fake.mu.Unlock()
	defer s.changedLocked(c)
	if err := s.namespaceOpenLocked(c); err != nil {
		return nil, err
	}
	return s.fakeOf(c.res).createLocked(doc, "")
}

func (s *memServer) update(c call, doc map[string]any) ([]byte, error) {
	f := s.fakeOf(c.res)
	rv, _ := metadata(doc)["resourceVersion"].(string)
	s.fake.mu.Lock()
	defer s.fake.mu.Unlock()
	defer s.changedLocked(c)
	old, err := f.currentLocked(c.key(), rv, !f.builtin)
	if err != nil {
		return nil, err
	}
	return f.storeLocked(c.key(), old, f.merge(old, doc, c.sub == "status"), "")
}

// patch answers a patch or an apply, and tells whether an apply created
// the object.
func (s *memServer) patch(r *http.Request, c call) ([]byte, bool, error) {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, false, err
	}
	exists := true
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if c.verb == "apply" {
		if data, err = decodeBody(ct, data, c.res); err != nil {
			return nil, false, err
		}
		s.fake.mu.Lock()
		_, exists = s.fake.objs[c.key()]
		var closed error
		if !exists {
			closed = s.namespaceOpenLocked(c)
		}
		s.fake.mu.Unlock()
		if closed != nil {
			return nil, false, closed
		}
	}
	q := r.URL.Query()
	opts := kctl.PatchOptions{Subresource: c.sub, FieldManager: q.Get("fieldManager"), Force: q.Get("force") == "true"}
	b, err := s.fakeOf(c.res).patch(c.namespace, c.name, kctl.PatchType(ct), data, opts)
	s.fake.mu.Lock()
	s.changedLocked(c)
	s.fake.mu.Unlock()
	return b, !exists && err == nil, err
}

// namespaceOpenLocked refuses a new object in a namespace that does not
// exist or is being deleted, as the API server's NamespaceLifecycle
// admission does.
func (s *memServer) namespaceOpenLocked(c call) error {
	if c.namespace == "" {
		return nil
	}
	ns, ok := s.fake.log.metas[namespaceKey(c.namespace)]
	switch {
	case !ok:
		return apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, c.namespace)
	case ns.DeletionTimestamp != nil:
		return apierrors.NewForbidden(schema.GroupResource{Group: c.res.res.Group, Resource: c.res.res.Plural}, c.name,
			fmt.Errorf("unable to create new content in namespace %s because it is being terminated", c.namespace))
	}
	return nil
}

// changedLocked runs what follows a write of c: the CRDs' resources are
// found again after a CRD's, and garbage collection looks at what changed.
func (s *memServer) changedLocked(c call) {
	if c.res == crdResource {
		s.crds = nil
	}
	s.collectLocked()
}
