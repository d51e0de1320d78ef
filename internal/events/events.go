// Package events is what kctl's EventRecorder decides about Events
// without writing them: which are repeats (Key), the flood limit per
// object and type (Limiter, client-go's spam filter), the Events written
// that repeats merge into (Written), which write failures are worth
// retrying (Transient), and an Event in the API it is written through:
// events.k8s.io/v1 (V1, SeriesPatch) or core/v1 (CountPatch).
package events

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The recorder's limits; the first three and the cache size are
// client-go's (tools/record).
const (
	// Burst is the Events per object and type before the limit applies
	Burst = 25
	// Refill: then one more Event per object and type per 5 minutes
	Refill = 5 * time.Minute
	// MergeWindow: a repeat within 10 minutes of the last one is merged
	// into it
	MergeWindow = 10 * time.Minute
	// CacheSize is the objects and Events remembered for the limit and
	// for merging
	CacheSize = 4096
)

// Key identifies repeats of an Event; see KeyOf.
type Key struct {
	// UID, or kind/namespace/name for an object without one
	object, related              string
	typ, reason, action, message string
}

// KeyOf is e's Key: its object, related object, type, reason, action
// and message.
func KeyOf(e *corev1.Event) Key {
	related := ""
	if e.Related != nil {
		related = refKey(*e.Related)
	}
	return Key{refKey(e.InvolvedObject), related, e.Type, e.Reason, e.Action, e.Message}
}

// refKey is o's UID, or kind/namespace/name for an object without one.
func refKey(o corev1.ObjectReference) string {
	path := o.Kind + "/" + o.Namespace + "/" + o.Name
	return cmp.Or(string(o.UID), path)
}

// The limits events.k8s.io/v1 puts on an Event's fields (kube-apiserver's
// validation): a longer field would be refused, so V1 cuts it.
const (
	NoteLimit   = 1024
	ReasonLimit = 128 // also action's and reportingInstance's
)

// V1Event is events.k8s.io/v1's Event, the fields kctl writes. kctl does
// not import k8s.io/api/events/v1: an API package's type registration
// links it into every program.
type V1Event struct {
	metav1.TypeMeta     `json:",inline"`
	metav1.ObjectMeta   `json:"metadata,omitempty"`
	EventTime           metav1.MicroTime        `json:"eventTime"`
	Series              *Series                 `json:"series,omitempty"`
	ReportingController string                  `json:"reportingController,omitempty"`
	ReportingInstance   string                  `json:"reportingInstance,omitempty"`
	Action              string                  `json:"action,omitempty"`
	Reason              string                  `json:"reason,omitempty"`
	Regarding           corev1.ObjectReference  `json:"regarding,omitempty"`
	Related             *corev1.ObjectReference `json:"related,omitempty"`
	Note                string                  `json:"note,omitempty"`
	Type                string                  `json:"type,omitempty"`
}

// Series is events.k8s.io/v1's EventSeries: how often an Event happened,
// the last time when.
type Series struct {
	Count            int32            `json:"count"`
	LastObservedTime metav1.MicroTime `json:"lastObservedTime"`
}

// V1 is e, named and timed, as an events.k8s.io/v1 Event, as client-go's
// tools/events writes one: the note, reason, action and reporting
// instance cut to the API's limits; no series (SeriesPatch adds it to a
// repeat) and none of the deprecated core/v1 fields, which the API refuses
// on create.
func V1(e *corev1.Event) *V1Event {
	return &V1Event{
		ObjectMeta:          metav1.ObjectMeta{Namespace: e.Namespace, Name: e.Name},
		EventTime:           metav1.NewMicroTime(e.FirstTimestamp.Time),
		ReportingController: e.ReportingController,
		ReportingInstance:   cut(e.ReportingInstance, ReasonLimit),
		Action:              cut(e.Action, ReasonLimit),
		Reason:              cut(e.Reason, ReasonLimit),
		Regarding:           e.InvolvedObject,
		Related:             e.Related,
		Note:                cut(e.Message, NoteLimit),
		Type:                e.Type,
	}
}

// cut is s cut to at most n bytes, on a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// SeriesPatch is the JSON merge patch that makes an events.k8s.io/v1
// Event a series of count, last seen at last.
func SeriesPatch(count int32, last time.Time) []byte {
	series := Series{Count: count, LastObservedTime: metav1.NewMicroTime(last)}
	b, _ := json.Marshal(map[string]any{"series": series})
	return b
}

// CountPatch is the JSON merge patch that gives a core/v1 Event count,
// last seen at last.
func CountPatch(count int32, last time.Time) []byte {
	b, _ := json.Marshal(map[string]any{"count": count, "lastTimestamp": metav1.NewTime(last)})
	return b
}

// Limiter limits Events per object and type: a burst of Burst, then one
// per Refill. It is safe for concurrent use.
type Limiter struct {
	mu sync.Mutex // guards limits
	// by object and type; at most CacheSize
	limits map[Key]*tokenBucket
}

// NewLimiter returns a Limiter that has seen no Event.
func NewLimiter() *Limiter {
	return &Limiter{limits: map[Key]*tokenBucket{}}
}

// Allow takes a token at now from the bucket of key's object and type.
func (l *Limiter) Allow(key Key, now time.Time) bool {
	key = Key{object: key.object, typ: key.typ}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.limits[key]
	if b == nil {
		// A bucket that has refilled by now is full: forget those first.
		full := func(b *tokenBucket) bool {
			gained := float64(now.Sub(b.last)) / float64(Refill)
			return gained >= Burst-b.tokens
		}
		if len(l.limits) >= CacheSize {
			pruneLocked(l.limits, full)
		}
		b = &tokenBucket{tokens: Burst, last: now}
		l.limits[key] = b
	}
	return b.take(now)
}

// tokenBucket holds up to Burst tokens and gains one per Refill.
type tokenBucket struct {
	tokens float64
	last   time.Time
}

func (b *tokenBucket) take(now time.Time) bool {
	if now.After(b.last) {
		gained := float64(now.Sub(b.last)) / float64(Refill)
		b.tokens = min(Burst, b.tokens+gained)
		b.last = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// pruneLocked deletes the entries of m that stale reports true for, then
// arbitrary ones until m is below CacheSize. The caller holds m's lock.
func pruneLocked[K comparable, V any](m map[K]V, stale func(V) bool) {
	maps.DeleteFunc(m, func(_ K, v V) bool { return stale(v) })
	tooMany := func(K, V) bool { return len(m) >= CacheSize }
	maps.DeleteFunc(m, tooMany) // len(m) falls as it deletes
}

// Written is the Events written, for merging repeats into, and the time
// in the last Event's name, so names never repeat. One goroutine owns it
// (the recorder's writer).
type Written struct {
	seen     map[Key]*seenEvent
	lastName int64
}

// seenEvent is an Event on the server that repeats merge into.
type seenEvent struct {
	namespace, name string
	count           int32
	last            time.Time
}

// NewWritten returns a Written that holds no Event.
func NewWritten() *Written {
	return &Written{seen: map[Key]*seenEvent{}}
}

// Repeat reports whether an Event of key at at repeats one written
// within MergeWindow; if so it counts it there, and returns that
// Event's namespace, name and count now.
func (w *Written) Repeat(key Key, at time.Time) (namespace, name string, count int32, ok bool) {
	prev := w.seen[key]
	if prev == nil || at.Sub(prev.last) >= MergeWindow {
		return "", "", 0, false
	}
	prev.count++
	prev.last = at
	return prev.namespace, prev.name, prev.count, true
}

// Name is the name of a new Event at at about the object named object,
// named like client-go's: <object name>.<Unix nanoseconds, hex>. Two
// Events in one clock tick get names one nanosecond apart.
func (w *Written) Name(object string, at time.Time) string {
	w.lastName = max(at.UnixNano(), w.lastName+1)
	return fmt.Sprintf("%s.%x", object, w.lastName)
}

// Remember records the new Event namespace/name of key, written at at,
// for repeats to merge into.
func (w *Written) Remember(key Key, namespace, name string, at time.Time) {
	if len(w.seen) >= CacheSize {
		expired := func(s *seenEvent) bool {
			return at.Sub(s.last) >= MergeWindow
		}
		pruneLocked(w.seen, expired)
	}
	w.seen[key] = &seenEvent{
		namespace: namespace,
		name:      name,
		count:     1,
		last:      at,
	}
}

// Transient reports whether a write that failed with err may succeed if
// tried again: the API server unreachable, overloaded or timing out.
func Transient(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		canceled := errors.Is(err, context.Canceled)
		timedOut := errors.Is(err, context.DeadlineExceeded)
		return !canceled && !timedOut
	}
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsTooManyRequests(err) || apierrors.IsInternalError(err) ||
		apierrors.IsServiceUnavailable(err)
}
