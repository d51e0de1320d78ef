package kctltest

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// changeLog is what an in-memory server (StartInMemory) keeps of a Fake's
// changes beyond its objects: the changes since the last compaction, for
// watches, and an index of the objects' metadata, for garbage collection.
// Its fields are guarded by the Fake's mu.
type changeLog struct {
	// changes are by resourceVersion, ascending; a watch may start after
	// any resourceVersion from oldest on.
	changes []change
	oldest  int64
	// keep is how many changes a compaction keeps.
	keep int
	// changed is closed, and replaced, at each change: watches wait on it.
	changed chan struct{}

	metas    map[fakeKey]objMeta             // every object's
	byUID    map[string]fakeKey              // every object's key, by uid
	children map[string]map[fakeKey]struct{} // by owner uid: the objects whose ownerReferences name it
	// dirty are the keys garbage collection must look at: changed, or
	// whose owner or namespace changed.
	dirty map[fakeKey]struct{}
}

// change is one object's change, as a watch event carries it.
type change struct {
	rv   int64
	typ  string // ADDED, MODIFIED, DELETED
	key  fakeKey
	obj  []byte // the object after (for DELETED: as it went, at rv)
	prev []byte // before, for MODIFIED: a selective watch turns it into ADDED or DELETED
}

// objMeta is what garbage collection needs of an object's metadata.
type objMeta struct {
	UID               string                  `json:"uid"`
	OwnerReferences   []metav1.OwnerReference `json:"ownerReferences"`
	Finalizers        []string                `json:"finalizers"`
	DeletionTimestamp *metav1.Time            `json:"deletionTimestamp"`
}

func newChangeLog() *changeLog {
	return &changeLog{keep: 10000, changed: make(chan struct{}),
		metas: map[fakeKey]objMeta{}, byUID: map[string]fakeKey{},
		children: map[string]map[fakeKey]struct{}{}, dirty: map[fakeKey]struct{}{}}
}

// record notes that key became b (typ ADDED or MODIFIED; prev before), at
// the store's resourceVersion. It does nothing without an in-memory server.
func (s *Fake) record(key fakeKey, typ string, b, prev []byte) {
	l := s.log
	if l == nil {
		return
	}
	l.add(change{rv: s.rv, typ: typ, key: key, obj: b, prev: prev})
	l.index(key, b)
}

// recordDeleted notes that key, last b, was deleted, at a new
// resourceVersion. It does nothing without an in-memory server.
func (s *Fake) recordDeleted(key fakeKey, b []byte) {
	l := s.log
	if l == nil {
		return
	}
	s.rv++
	b = withResourceVersion(b, s.rv)
	l.add(change{rv: s.rv, typ: "DELETED", key: key, obj: b})
	l.index(key, nil)
}

// add appends c, compacting the log when it is twice keep, and wakes the watches.
func (l *changeLog) add(c change) {
	l.changes = append(l.changes, c)
	if len(l.changes) >= 2*l.keep {
		l.compact(l.changes[len(l.changes)-l.keep-1].rv)
	}
	close(l.changed)
	l.changed = make(chan struct{})
}

// compact forgets the changes up to resourceVersion rv: a watch from
// before rv is then 410 Gone.
func (l *changeLog) compact(rv int64) {
	i, _ := slices.BinarySearchFunc(l.changes, rv+1, func(c change, rv int64) int { return int(c.rv - rv) })
	l.changes = slices.Clone(l.changes[i:])
	l.oldest = max(l.oldest, rv)
}

// index updates the metadata index for key, now b (nil: deleted), and
// marks what garbage collection must look at.
func (l *changeLog) index(key fakeKey, b []byte) {
	old, had := l.metas[key]
	if had {
		delete(l.byUID, old.UID)
		for _, r := range old.OwnerReferences {
			if owner, ok := l.byUID[string(r.UID)]; ok {
				l.dirty[owner] = struct{}{} // one deleted in the foreground may wait for it
			}
			delete(l.children[string(r.UID)], key)
			if len(l.children[string(r.UID)]) == 0 {
				delete(l.children, string(r.UID))
			}
		}
	}
	l.dirty[key] = struct{}{}
	if key.Namespace != "" {
		l.dirty[namespaceKey(key.Namespace)] = struct{}{}
	}
	if b == nil {
		delete(l.metas, key)
		if had {
			for child := range l.children[old.UID] {
				l.dirty[child] = struct{}{}
			}
		}
		return
	}
	var m objMeta
	if start, end := metadataSpan(b); start < end {
		json.Unmarshal(b[start:end], &m) // stored JSON
	}
	l.metas[key] = m
	l.byUID[m.UID] = key
	for _, r := range m.OwnerReferences {
		if l.children[string(r.UID)] == nil {
			l.children[string(r.UID)] = map[fakeKey]struct{}{}
		}
		l.children[string(r.UID)][key] = struct{}{}
	}
}

// namespaceKey is the store's key of the namespace ns.
func namespaceKey(ns string) fakeKey {
	k := fakeKey{resource: "namespaces."}
	k.Name = ns
	return k
}

// withResourceVersion is the stored object b with its resourceVersion set
// to rv, decoding none of it: the value is replaced where it stands.
func withResourceVersion(b []byte, rv int64) []byte {
	mStart, mEnd := fieldSpan(b, 0, "metadata")
	if mStart == mEnd || b[mStart] != '{' {
		return b
	}
	quoted := strconv.AppendQuote(nil, strconv.FormatInt(rv, 10))
	start, end := fieldSpan(b[:mEnd], mStart, "resourceVersion")
	if start == end { // none yet: add it first
		start = mStart + 1
		end = start
		if b[skipSpace(b, start)] != '}' {
			quoted = append(quoted, ',')
		}
		quoted = append([]byte(`"resourceVersion":`), quoted...)
	}
	out := make([]byte, 0, len(b)+len(quoted)-(end-start))
	out = append(out, b[:start]...)
	out = append(out, quoted...)
	return append(out, b[end:]...)
}

// metadataSpan finds the metadata of the JSON object b: b[start:end] is
// its value; start == end if it has none (or it is not an object).
func metadataSpan(b []byte) (start, end int) {
	start, end = fieldSpan(b, 0, "metadata")
	if start == end || b[start] != '{' {
		return 0, 0
	}
	return start, end
}

// fieldSpan finds the value of the field name of the JSON object that
// begins at b[i]: b[start:end] is it; start == end if there is none. It
// reads no further than that value, and decodes nothing: b is valid JSON
// (a stored object), and its keys need no unescaping.
func fieldSpan(b []byte, i int, name string) (start, end int) {
	depth := 0
	for ; i < len(b); i++ {
		switch b[i] {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return 0, 0
			}
		case '"':
			j := skipString(b, i)
			k := skipSpace(b, j)
			if depth == 1 && k < len(b) && b[k] == ':' && j-i == len(name)+2 && string(b[i+1:j-1]) == name {
				start = skipSpace(b, k+1)
				return start, skipValue(b, start)
			}
			i = j - 1
		}
	}
	return 0, 0
}

// skipValue returns the index after the JSON value that starts at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '{', '[':
		return skipObject(b, i)
	case '"':
		return skipString(b, i)
	}
	for i < len(b) && !strings.ContainsRune(",}] \t\r\n", rune(b[i])) {
		i++
	}
	return i
}

// skipString returns the index after the JSON string that starts at b[i].
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// skipSpace returns the index of the first byte from i on that is not
// JSON white space.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipObject returns the index after the JSON object or array that starts
// at b[i].
func skipObject(b []byte, i int) int {
	depth := 0
	for ; i < len(b); i++ {
		switch b[i] {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1
			}
		case '"':
			i = skipString(b, i) - 1
		}
	}
	return len(b)
}
