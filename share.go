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
// shared, are compared byte for byte with earlier ones of the same Go type,
// found by a hash. Equal bytes mean equal values (the pointers in them are
// the same pointers), so a match is always right; a miss only costs memory.
//
// Cached objects are read-only by contract (see Informer), which is what
// makes sharing safe; readers that modify get deep copies (Client, Reconcile).
// A shared slice's capacity is its length, so even a wrongful append copies.

import (
	"bytes"
	"hash/maphash"
	"maps"
	"reflect"
	"sync"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What a sharer remembers is bounded: it starts a new generation of every
// table once the current one holds shareGeneration values or shareBytes
// bytes, and forgets the generation before; values used in the last two
// generations stay. So a stream of unique values (names, IPs, timestamps, the
// old versions of objects updated often) pins at most twice the budget, and
// a value larger than shareMaxValue is never remembered.
const (
	shareGeneration = 16384
	shareBytes      = 4 << 20
	shareMaxValue   = 16 << 10
)

// sharer makes new objects of one Go type share equal parts with objects it
// saw before. Safe for concurrent use (an informer's watches share it).
type sharer struct {
	mu     sync.Mutex
	plan   *sharePlan // nil: the type has nothing to share
	seed   maphash.Seed
	gen    uint32 // the current generation
	values int    // remembered in the current generation
	bytes  int
	strs   generations[string, string]
	smaps  generations[uint64, map[string]string]
	lists  generations[uint64, map[corev1.ResourceName]resource.Quantity]
	blocks map[*sharePlan]*generations[blockKey, unsafe.Pointer] // per pointer or slice type
}

type blockKey struct {
	hash uint64
	size uintptr
}

func newSharer[T any]() *sharer {
	sharePlansMu.Lock()
	defer sharePlansMu.Unlock()
	return &sharer{plan: sharePlanOf(reflect.TypeFor[T](), map[reflect.Type]*sharePlan{}), seed: maphash.MakeSeed(),
		blocks: map[*sharePlan]*generations[blockKey, unsafe.Pointer]{}}
}

// remember counts a value of size bytes into the current generation, and
// says whether it may be remembered at all.
func (s *sharer) remember(size int) bool {
	if size > shareMaxValue {
		return false
	}
	if s.values >= shareGeneration || s.bytes+size > shareBytes {
		s.gen, s.values, s.bytes = s.gen+1, 0, 0
		s.strs.turn(s.gen)
		s.smaps.turn(s.gen)
		s.lists.turn(s.gen)
		for _, g := range s.blocks {
			g.turn(s.gen)
		}
	}
	s.values, s.bytes = s.values+1, s.bytes+size
	return true
}

// share makes obj (a *T) point at equal parts seen before. obj must be new:
// its memory is changed in place, and nobody else may hold any of it.
func (s *sharer) share(obj any) {
	if s.plan == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.walk(s.plan, reflect.ValueOf(obj).UnsafePointer())
}

// walk shares the parts of the value of p's type at at. Each store compares
// first, so memory that is already shared is never written.
func (s *sharer) walk(p *sharePlan, at unsafe.Pointer) {
	switch p.kind {
	case shareString:
		str := (*string)(at)
		if *str == "" {
			return
		}
		if seen, ok := s.strs.get(s.gen, *str); !ok {
			if s.remember(len(*str)) {
				s.strs.put(s.gen, *str, *str)
			}
		} else if unsafe.StringData(seen) != unsafe.StringData(*str) {
			*str = seen
		}
	case shareStringMap:
		if m := (*map[string]string)(at); len(*m) > 0 {
			if seen := shareMap(s, &s.smaps, *m); !sameMap(seen, *m) {
				*m = seen
			}
		}
	case shareResourceList:
		if m := (*map[corev1.ResourceName]resource.Quantity)(at); len(*m) > 0 {
			if seen := shareMap(s, &s.lists, *m); !sameMap(seen, *m) {
				*m = seen
			}
		}
	case shareQuantity: // String caches the canonical form in the Quantity: do it while it is ours
		_ = (*resource.Quantity)(at).String()
	case shareStruct:
		for _, f := range p.fields {
			s.walk(f.plan, unsafe.Add(at, f.offset))
		}
	case sharePointer:
		if ptr := (*unsafe.Pointer)(at); *ptr != nil && p.size > 0 {
			if p.elem != nil {
				s.walk(p.elem, *ptr)
			}
			if seen := s.block(p, *ptr, p.size); seen != *ptr {
				*ptr = seen
			}
		}
	case shareSlice:
		if h := (*sliceHeader)(at); h.len > 0 && p.size > 0 {
			for i := range h.len {
				if p.elem != nil {
					s.walk(p.elem, unsafe.Add(h.data, uintptr(i)*p.size))
				}
			}
			if seen := s.block(p, h.data, uintptr(h.len)*p.size); seen != h.data || h.cap != h.len {
				h.data, h.cap = seen, h.len // every header of a block alike
			}
		}
	}
}

type sliceHeader struct {
	data     unsafe.Pointer
	len, cap int
}

// block returns the memory of an earlier value of p's type whose n bytes
// equal those at at, or at, remembered.
func (s *sharer) block(p *sharePlan, at unsafe.Pointer, n uintptr) unsafe.Pointer {
	g := s.blocks[p]
	if g == nil {
		g = &generations[blockKey, unsafe.Pointer]{}
		s.blocks[p] = g
	}
	b := unsafe.Slice((*byte)(at), n)
	k := blockKey{maphash.Bytes(s.seed, b), n}
	if seen, ok := g.get(s.gen, k); ok {
		if bytes.Equal(unsafe.Slice((*byte)(seen), n), b) {
			return seen
		}
		return at // another value with this hash: keep both
	}
	if s.remember(int(n)) {
		g.put(s.gen, k, at)
	}
	return at
}

// shareMap returns the map seen before that equals m, or m, remembered.
// Maps are found by a hash of their entries that ignores their order.
func shareMap[K ~string, V comparable](s *sharer, g *generations[uint64, map[K]V], m map[K]V) map[K]V {
	h, size := uint64(len(m)), 0
	for k, v := range m {
		h += (maphash.String(s.seed, string(k)) ^ maphash.Comparable(s.seed, v)*0x9e3779b97f4a7c15) * 0xff51afd7ed558ccd
		size += len(k) + int(unsafe.Sizeof(v))
		if str, ok := any(v).(string); ok {
			size += len(str) // what a remembered map pins: a ConfigMap's data
		}
	}
	if seen, ok := g.get(s.gen, h); ok && maps.Equal(seen, m) {
		return seen
	}
	if s.remember(size) {
		g.put(s.gen, h, m)
	}
	return m
}

func sameMap[M ~map[K]V, K comparable, V any](a, b M) bool {
	return *(*unsafe.Pointer)(unsafe.Pointer(&a)) == *(*unsafe.Pointer)(unsafe.Pointer(&b))
}

// generations is a map that forgets what was not used in the last two of
// its sharer's generations: it turns over when it sees a newer one.
type generations[K comparable, V any] struct {
	cur, prev map[K]V
	gen       uint32 // cur's generation
}

func (g *generations[K, V]) get(gen uint32, k K) (V, bool) {
	g.turn(gen)
	if v, ok := g.cur[k]; ok {
		return v, true
	}
	v, ok := g.prev[k]
	if ok {
		g.cur[k] = v
	}
	return v, ok
}

func (g *generations[K, V]) put(gen uint32, k K, v V) {
	g.turn(gen)
	g.cur[k] = v
}

func (g *generations[K, V]) turn(gen uint32) {
	switch {
	case g.cur == nil:
		g.cur, g.gen = map[K]V{}, gen
	case gen == g.gen+1:
		g.prev, g.cur, g.gen = g.cur, map[K]V{}, gen
	case gen != g.gen: // skipped a generation: all of it is old
		g.prev, g.cur, g.gen = nil, map[K]V{}, gen
	}
}

// A sharePlan says where in a value of one Go type the shareable parts are,
// worked out once per type by reflection.
type sharePlan struct {
	kind   shareKind
	fields []shareField // shareStruct: the fields with something to share
	elem   *sharePlan   // sharePointer, shareSlice: the element's plan, if any
	size   uintptr      // sharePointer, shareSlice: the element's size
}

type shareField struct {
	offset uintptr
	plan   *sharePlan
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

// sharePlans holds each type's plan (nil: nothing to share), built whole
// under sharePlansMu: a recursive type's plan is incomplete while it is built.
var (
	sharePlansMu sync.Mutex
	sharePlans   = map[reflect.Type]*sharePlan{}
)

// sharePlanOf returns t's plan, nil if t holds nothing to share. Only
// exported fields are walked (the bytes of the others still count when their
// struct is compared); ObjectMeta's name, uid and resourceVersion are unique
// to each object and not remembered; a Quantity gets its cached string made
// (readers would write it, into memory other objects share), then is
// compared whole.
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
		p = &sharePlan{kind: shareString}
	case t == reflect.TypeFor[resource.Quantity]():
		p = &sharePlan{kind: shareQuantity}
	case t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice:
		p = &sharePlan{kind: sharePointer, size: t.Elem().Size()}
		if t.Kind() == reflect.Slice {
			p.kind = shareSlice
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
