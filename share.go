package kctl

// Sharing: the cache keeps one copy of what many of its objects hold alike.
// The Pods of one workload carry the same containers, volumes, tolerations,
// labels and owner; decoded, each Pod holds its own copy of every one of
// them, which is most of a cached Pod's memory. Before an object is stored,
// a sharer makes it point at equal parts of objects stored before, so the
// copies decoded for this object become garbage.
//
// It works bottom up over the memory of the new object: strings, string maps
// and resource lists are swapped for equal ones seen before; then every
// pointer's target and every slice's elements, whose own parts are by now
// shared, are compared byte for byte (padding zeroed) with earlier ones of
// the same Go type, found by a hash. Equal bytes mean equal values (the
// pointers in them are the same pointers), so a match is always right; a miss
// only costs memory.
//
// The sharer keeps nothing alive: it finds earlier parts through weak
// pointers, so a part lives exactly as long as some object holds it, and a
// stream of unique values (names, IPs, the old versions of objects updated
// often) pins nothing. A part is remembered the second time it is seen (in
// another object), so values unique to one object cost no entry; the first
// object keeps its own copy. The weak pointers point only at copies the
// sharer made itself, which are always on the heap (an object's parts need
// not be: a transform may set a string constant or a pointer to a variable).
//
// Cached objects are read-only by contract (see Informer), which is what
// makes sharing safe; readers that modify get deep copies (Client, Reconcile).
// A shared slice's capacity is its length, so even a wrongful append copies.

import (
	"bytes"
	"hash/maphash"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"unsafe"
	"weak"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// sharer makes new objects of one Go type share equal parts with objects it
// saw before that are still alive. Safe for concurrent use (an informer's
// watches share it).
//
// Every entry of seen is a weak pointer to a copy the sharer made of a part,
// keyed by the part's type, hash and size. An entry whose part was freed is
// dropped when seen has doubled since the last sweep, so seen holds at most
// about twice as many entries as there are distinct parts alive, plus 1024.
type sharer struct {
	mu      sync.Mutex
	plan    *sharePlan // nil: the type has nothing to share
	seed    maphash.Seed
	seen    map[shareKey]weak.Pointer[byte]
	once    map[uint64]uint64 // hashes of keys seen once lately (at most shareOnce), and in which object
	objects uint64            // objects shared so far
	swept   int               // len(seen) after the last sweep
}

// shareOnce bounds the keys a sharer remembers having seen once: a value
// shares only if it is seen again within the next shareOnce values seen once.
const shareOnce = 8192

type shareKey struct {
	plan *sharePlan // strings: stringPlan
	hash uint64
	size uintptr // bytes of a string or block, entries of a map
}

func newSharer[T any]() *sharer {
	sharePlansMu.Lock()
	defer sharePlansMu.Unlock()
	return &sharer{plan: sharePlanOf(reflect.TypeFor[T](), map[reflect.Type]*sharePlan{}), seed: maphash.MakeSeed(),
		seen: map[shareKey]weak.Pointer[byte]{}, once: map[uint64]uint64{}}
}

// share makes obj (a *T) point at equal parts seen before. obj must be new:
// its memory is changed in place, and nobody else may hold any of it.
func (s *sharer) share(obj any) {
	if s.plan == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objects++
	s.walk(s.plan, reflect.ValueOf(obj).UnsafePointer())
}

// walk shares the parts of the value of p's type at at. Each store compares
// first, so memory that is already shared is never written.
func (s *sharer) walk(p *sharePlan, at unsafe.Pointer) {
	switch p.kind {
	case shareString:
		str := (*string)(at)
		seen := s.string(*str)
		if unsafe.StringData(seen) != unsafe.StringData(*str) {
			*str = seen
		}
	case shareStringMap:
		m := (*map[string]string)(at)
		seen := shareMap(s, p, *m)
		if !sameMap(seen, *m) {
			*m = seen
		}
	case shareResourceList:
		m := (*map[corev1.ResourceName]resource.Quantity)(at)
		seen := shareMap(s, p, *m)
		if !sameMap(seen, *m) {
			*m = seen
		}
	case shareQuantity:
		// Readers make the canonical string (String, Size): make it while
		// the Quantity is ours, and share it like any string.
		_ = (*resource.Quantity)(at).String()
		if quantityString != 0 {
			s.walk(stringPlan, unsafe.Add(at, quantityString))
		}
	case shareStruct:
		for _, f := range p.fields {
			s.walk(f.plan, unsafe.Add(at, f.offset))
		}
	case sharePointer:
		ptr := (*unsafe.Pointer)(at)
		if *ptr == nil {
			return
		}
		s.walkBlock(p, *ptr, 1)
		seen := s.block(p, *ptr, 1)
		if seen != *ptr {
			*ptr = seen
		}
	case shareSlice:
		h := (*sliceHeader)(at)
		if h.len == 0 {
			return
		}
		s.walkBlock(p, h.data, h.len)
		seen := s.block(p, h.data, h.len)
		if seen != h.data || h.cap != h.len {
			h.data = seen
			h.cap = h.len // every header of a block alike
		}
	}
}

type sliceHeader struct {
	data     unsafe.Pointer
	len, cap int
}

// walkBlock shares the parts of the n elements at at and zeroes their padding.
func (s *sharer) walkBlock(p *sharePlan, at unsafe.Pointer, n int) {
	size := p.typ.Size()
	for i := range n {
		elem := unsafe.Add(at, uintptr(i)*size)
		if p.elem != nil {
			s.walk(p.elem, elem)
		}
		for _, h := range p.holes {
			hole := unsafe.Slice((*byte)(unsafe.Add(elem, h.offset)), h.size)
			if slices.ContainsFunc(hole, func(b byte) bool { return b != 0 }) {
				clear(hole)
			}
		}
	}
}

// string returns an equal string seen before, or a remembered copy of str.
func (s *sharer) string(str string) string {
	if str == "" {
		return str
	}
	k := shareKey{stringPlan, maphash.String(s.seed, str), uintptr(len(str))}
	if seen := s.seen[k].Value(); seen != nil && unsafe.String(seen, len(str)) == str {
		return unsafe.String(seen, len(str))
	}
	if !s.again(k) {
		return str
	}
	c := strings.Clone(str)
	s.remember(k, unsafe.StringData(c))
	return c
}

// block returns the memory of n earlier elements of p's type equal to the n
// at at, or a remembered copy of them.
func (s *sharer) block(p *sharePlan, at unsafe.Pointer, n int) unsafe.Pointer {
	size := uintptr(n) * p.typ.Size()
	b := unsafe.Slice((*byte)(at), size)
	k := shareKey{p, maphash.Bytes(s.seed, b), size}
	if seen := s.seen[k].Value(); seen != nil && bytes.Equal(unsafe.Slice(seen, size), b) {
		return unsafe.Pointer(seen)
	}
	if !s.again(k) {
		return at
	}
	c := reflect.MakeSlice(p.slice, n, n) // typed memory: the collector sees its pointers
	reflect.Copy(c, reflect.NewAt(p.slice, unsafe.Pointer(&sliceHeader{at, n, n})).Elem())
	s.remember(k, (*byte)(c.UnsafePointer()))
	return c.UnsafePointer()
}

// shareMap returns an equal map seen before, or a remembered copy of m.
// Maps are found by a hash of their entries that ignores their order.
func shareMap[K ~string, V comparable](s *sharer, p *sharePlan, m map[K]V) map[K]V {
	if len(m) == 0 {
		return m
	}
	h := uint64(0)
	for k, v := range m {
		h += (maphash.String(s.seed, string(k)) ^ maphash.Comparable(s.seed, v)*0x9e3779b97f4a7c15) * 0xff51afd7ed558ccd
	}
	k := shareKey{p, h, uintptr(len(m))}
	if seen := s.seen[k].Value(); seen != nil {
		if seen := *(*map[K]V)(unsafe.Pointer(&seen)); maps.Equal(seen, m) {
			return seen
		}
	}
	if !s.again(k) {
		return m
	}
	c := maps.Clone(m)
	s.remember(k, *(**byte)(unsafe.Pointer(&c)))
	return c
}

func sameMap[M ~map[K]V, K comparable, V any](a, b M) bool {
	return *(*unsafe.Pointer)(unsafe.Pointer(&a)) == *(*unsafe.Pointer)(unsafe.Pointer(&b))
}

// again says whether a part of key k, not found in seen, is worth
// remembering: only when it is seen again, so that the many values unique to
// one object (its IP, its container IDs) cost no entry in seen.
func (s *sharer) again(k shareKey) bool {
	h := maphash.Comparable(s.seed, k)
	if obj, ok := s.once[h]; ok && obj != s.objects {
		return true
	}
	if len(s.once) >= shareOnce {
		clear(s.once)
	}
	s.once[h] = s.objects
	return false
}

// remember makes k find c, a copy the sharer made, as long as c lives, and
// drops the entries of freed parts once seen has doubled since the last sweep.
func (s *sharer) remember(k shareKey, c *byte) {
	s.seen[k] = weak.Make(c)
	if len(s.seen) < 2*s.swept+1024 {
		return
	}
	maps.DeleteFunc(s.seen, func(_ shareKey, v weak.Pointer[byte]) bool { return v.Value() == nil })
	s.swept = len(s.seen)
}

// A sharePlan says where in a value of one Go type the shareable parts are,
// worked out once per type by reflection.
type sharePlan struct {
	kind   shareKind
	fields []shareField // shareStruct: the fields with something to share
	elem   *sharePlan   // sharePointer, shareSlice: the element's plan, nil if it has nothing to share
	typ    reflect.Type // sharePointer, shareSlice: the element's type
	slice  reflect.Type // sharePointer, shareSlice: []typ, the copies' type
	holes  []shareBytes // sharePointer, shareSlice: the padding in an element
}

type shareField struct {
	offset uintptr
	plan   *sharePlan
}

type shareBytes struct {
	offset, size uintptr
}

type shareKind uint8

const (
	shareString shareKind = iota
	shareStringMap
	shareResourceList
	shareQuantity
	shareStruct
	sharePointer
	shareSlice
)

// stringPlan is the plan of every string type: equal strings share whatever
// their Go type.
var stringPlan = &sharePlan{kind: shareString}

// quantityString is where a Quantity keeps its canonical string; 0 if this
// version of apimachinery keeps it elsewhere (then it is not shared).
var quantityString = func() uintptr {
	f, ok := reflect.TypeFor[resource.Quantity]().FieldByName("s")
	if !ok || f.Type != reflect.TypeFor[string]() {
		return 0
	}
	return f.Offset
}()

// sharePlans holds each type's plan (nil: nothing to share), built whole
// under sharePlansMu: a recursive type's plan is incomplete while it is built.
var (
	sharePlansMu sync.Mutex
	sharePlans   = map[reflect.Type]*sharePlan{}
)

// sharePlanOf returns t's plan, nil if t holds nothing to share. Only
// exported fields are walked (the bytes of the others still count when their
// struct is compared); ObjectMeta's name, uid and resourceVersion are unique
// to each object and not remembered; a Quantity gets its canonical string
// made and shared, then is compared whole.
func sharePlanOf(t reflect.Type, building map[reflect.Type]*sharePlan) *sharePlan {
	if p, ok := sharePlans[t]; ok {
		return p
	}
	if p, ok := building[t]; ok { // a recursive type: its plan is being built
		return p
	}
	var p *sharePlan
	switch {
	case t == reflect.TypeFor[map[string]string]():
		p = &sharePlan{kind: shareStringMap}
	case t == reflect.TypeFor[corev1.ResourceList]():
		p = &sharePlan{kind: shareResourceList}
	case t.Kind() == reflect.String:
		p = stringPlan
	case t == reflect.TypeFor[resource.Quantity]():
		p = &sharePlan{kind: shareQuantity}
	case t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice:
		p = &sharePlan{kind: sharePointer, typ: t.Elem(), slice: reflect.SliceOf(t.Elem()), holes: holesOf(t.Elem(), 0, nil)}
		if t.Kind() == reflect.Slice {
			p.kind = shareSlice
		}
		if t.Elem().Size() == 0 {
			p = nil
			break
		}
		building[t] = p
		p.elem = sharePlanOf(t.Elem(), building)
	case t.Kind() == reflect.Struct:
		p = &sharePlan{kind: shareStruct}
		building[t] = p
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() || t == reflect.TypeFor[metav1.ObjectMeta]() &&
				(f.Name == "Name" || f.Name == "UID" || f.Name == "ResourceVersion" || f.Name == "SelfLink") {
				continue
			}
			if fp := sharePlanOf(f.Type, building); fp != nil {
				p.fields = append(p.fields, shareField{f.Offset, fp})
			}
		}
		if len(p.fields) == 0 {
			p = nil
		}
	}
	delete(building, t)
	sharePlans[t] = p
	return p
}

// holesOf appends to holes the padding bytes of a value of type t at offset.
func holesOf(t reflect.Type, offset uintptr, holes []shareBytes) []shareBytes {
	switch t.Kind() {
	case reflect.Struct:
		end := uintptr(0)
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Offset > end {
				holes = append(holes, shareBytes{offset + end, f.Offset - end})
			}
			holes = holesOf(f.Type, offset+f.Offset, holes)
			end = f.Offset + f.Type.Size()
		}
		if t.Size() > end {
			holes = append(holes, shareBytes{offset + end, t.Size() - end})
		}
	case reflect.Array:
		for i := range t.Len() {
			holes = holesOf(t.Elem(), offset+uintptr(i)*t.Elem().Size(), holes)
		}
	}
	return holes
}
