package kctltest

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// watchTimeout ends a watch that asked for no timeoutSeconds, as the API
// server's --min-request-timeout (30 to 60 minutes) does.
const watchTimeout = 30 * time.Minute

// bookmarkEvery is how often a quiet watch with allowWatchBookmarks gets
// a BOOKMARK, as the API server's watch cache sends them (about a minute).
const bookmarkEvery = time.Minute

// watch answers a watch: from resourceVersion (410 Gone, as an ERROR
// event, if compacted), or with an ADDED event for each object first
// (resourceVersion "" or "0", or sendInitialEvents, which a BOOKMARK
// annotated k8s.io/initial-events-end ends), then each change. A change
// that makes an object enter or leave a selective watch is ADDED or
// DELETED (with the object as it last matched), as the watch cache sends it.
func (s *memServer) watch(w http.ResponseWriter, r *http.Request, c call) {
	q := r.URL.Query()
	sel, err := selectorOf(c, q)
	if err != nil {
		s.fail(w, err)
		return
	}
	initial := q.Get("sendInitialEvents") == "true"
	if initial && q.Get("resourceVersionMatch") != string(metav1.ResourceVersionMatchNotOlderThan) {
		s.fail(w, apierrors.NewInvalid(metav1.SchemeGroupVersion.WithKind("ListOptions").GroupKind(), "", field.ErrorList{
			field.Forbidden(field.NewPath("resourceVersionMatch"), "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan")}))
		return
	}
	bookmarks := q.Get("allowWatchBookmarks") == "true"
	timeout := watchTimeout
	if secs, err := strconv.Atoi(q.Get("timeoutSeconds")); err == nil && secs > 0 {
		timeout = time.Duration(secs) * time.Second
	}
	e := encodingOf(r, c.res, &s.memo)
	ct := e.contentType()
	if e.proto {
		ct += ";stream=watch"
	}
	drop := make(chan struct{})
	s.mu.Lock()
	s.watches[drop] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.watches, drop)
		s.mu.Unlock()
	}()

	var events [][]byte
	s.fake.mu.Lock()
	from, err := strconv.ParseInt(q.Get("resourceVersion"), 10, 64)
	fresh := initial || err != nil || from == 0
	if fresh {
		from = s.fake.rv
		for _, k := range s.sortedKeysLocked(sel) {
			events = append(events, s.eventLocked(e, c, "ADDED", s.fake.objs[k]))
		}
		if initial && bookmarks {
			events = append(events, s.eventLocked(e, c, "BOOKMARK", bookmark(c.res, from, true)))
		}
	}
	gone := from < s.fake.log.oldest
	s.fake.mu.Unlock()
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(http.StatusOK)
	if gone {
		s.gone(w, e, from)
		return
	}
	for _, ev := range events {
		if _, err := w.Write(ev); err != nil {
			return
		}
	}
	end := time.NewTimer(timeout)
	defer end.Stop()
	tick := time.NewTicker(bookmarkEvery)
	defer tick.Stop()
	for {
		s.fake.mu.Lock()
		l := s.fake.log
		if from < l.oldest {
			s.fake.mu.Unlock()
			s.gone(w, e, from)
			return
		}
		i, _ := slices.BinarySearchFunc(l.changes, from+1, func(c change, rv int64) int { return int(c.rv - rv) })
		events = events[:0]
		for _, ch := range l.changes[i:] {
			if typ, obj := sel.see(ch); typ != "" {
				events = append(events, s.eventLocked(e, c, typ, obj))
			}
		}
		from = s.fake.rv
		changed := l.changed
		s.fake.mu.Unlock()
		for _, ev := range events {
			if _, err := w.Write(ev); err != nil {
				return
			}
		}
		select {
		case <-changed:
		case <-tick.C:
			if bookmarks {
				if _, err := w.Write(s.eventLocked(e, c, "BOOKMARK", bookmark(c.res, from, false))); err != nil {
					return
				}
			}
		case <-end.C:
			return
		case <-drop:
			return
		case <-r.Context().Done():
			return
		}
	}
}

// eventLocked encodes one event; an object that does not encode becomes
// an ERROR event saying why.
func (s *memServer) eventLocked(e encoding, c call, typ string, obj []byte) []byte {
	b, err := e.event(c.res, typ, obj)
	if err != nil {
		st := metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError,
			Message: fmt.Sprintf("kctltest: encoding a %s event: %v", typ, err)}
		b, _ = e.event(c.res, "ERROR", e.status(st))
	}
	return b
}

// gone writes the ERROR event of a watch from a compacted resourceVersion.
func (s *memServer) gone(w http.ResponseWriter, e encoding, from int64) {
	st := apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", from, s.oldest())).Status()
	b, _ := e.event(nil, "ERROR", e.status(st))
	w.Write(b)
}

func (s *memServer) oldest() int64 {
	s.fake.mu.Lock()
	defer s.fake.mu.Unlock()
	return s.fake.log.oldest
}

// see is the event a watch with sel gets of ch, and its object: "" for
// none.
func (sel selector) see(ch change) (string, []byte) {
	now := sel.matches(ch.key, ch.obj)
	if ch.typ != "MODIFIED" || sel.labels.Empty() && sel.fields.Empty() {
		if now {
			return ch.typ, ch.obj
		}
		return "", nil
	}
	before := sel.matches(ch.key, ch.prev)
	switch {
	case before && now:
		return "MODIFIED", ch.obj
	case now:
		return "ADDED", ch.obj
	case before:
		return "DELETED", ch.prev // as the watch cache sends it: the object as it last matched
	}
	return "", nil
}
