package share

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
)

// A Sharer makes new objects of one Go type share equal parts with the
// objects it saw before that are still alive (the package doc says how).
//
// The zero Sharer shares nothing: get one from New. Most callers call
// Share on each new object before they store it. Safe for concurrent use
// (an informer's watches share one).
type Sharer struct {
	sharer
	// ptr is the type of the pointers Share takes: *T.
	ptr reflect.Type
}

// New returns a Sharer for the objects of the type that sample points to
// (a *T, nil is fine: (*T)(nil)). The first New of a type works out, by
// reflection, where its shareable parts are. Nothing here is generic over
// T: kctl's informers call it with their own type.
func New(sample any) *Sharer {
	ptr := reflect.TypeOf(sample)
	s := &Sharer{ptr: ptr}
	s.plan = planFor(ptr.Elem())
	s.seed = maphash.MakeSeed()
	s.seen = map[uint64]entry{}
	s.once = map[uint64]uint64{}
	s.mine = map[key]*byte{}
	return s
}

// Share makes obj, a *T of the Sharer's type, point at equal parts seen
// before. obj must be new: its memory is changed in place, so call Share
// before anybody else holds any of it. Do not modify obj afterwards: other
// objects hold its parts. Share panics if obj is of another type.
func (s *Sharer) Share(obj any) {
	if s.ptr == nil {
		return // the zero Sharer
	}
	v := reflect.ValueOf(obj)
	if v.Type() != s.ptr {
		panic("share: Share of a " + v.Type().String() +
			" on a Sharer of " + s.ptr.String())
	}
	s.share(v.UnsafePointer())
}

// sharer is a Sharer's state, apart from T so that its code is compiled
// once for all types.
//
// Every entry of seen is a weak pointer to a copy the sharer made of a
// part, with its key (the part's type, hash and size), under the key's
// slot (one 64-bit hash: a map of such keys is the fastest Go has, and the
// sharer's time goes mostly to finding parts). An entry whose part was
// freed is dropped when seen has doubled since the last sweep (swept is
// len(seen) after it), so seen holds at most about twice as many entries
// as there are distinct parts alive, plus 1024.
//
// mine holds, while one object is shared, the strings of that object
// that were not found in seen, so that a string the object holds twice (a
// Pod's token volume name, in each of its mounts) is held once; it is
// emptied after each object and keeps nothing alive.
//
// once holds the hashes of the keys seen once lately, at most onceMax,
// each with the number of the object it was seen in; objects counts the
// objects shared so far.
type sharer struct {
	mu      sync.Mutex
	plan    *plan // nil: the type has nothing to share
	seed    maphash.Seed
	seen    map[uint64]entry
	once    map[uint64]uint64
	mine    map[key]*byte
	objects uint64
	swept   int
}

// onceMax bounds the keys a sharer remembers having seen once: a value
// shares only if it is seen again within the next onceMax values seen once.
const onceMax = 8192

// A key finds a part in seen. plan is stringPlan for strings; size is the
// bytes of a string or block, the entries of a map.
type key struct {
	plan *plan
	hash uint64
	size uintptr
}

// slot is where seen keeps the part of key k: a hash of all of k. Two keys
// of one slot keep one part, the last remembered: the other's parts are
// not shared (a miss only costs memory).
func (k key) slot() uint64 {
	plan := uint64(uintptr(unsafe.Pointer(k.plan)))
	h := k.hash ^ plan*0x9e3779b97f4a7c15
	return (h ^ uint64(k.size)) * 0xff51afd7ed558ccd
}

// An entry of seen: a weak pointer to a part the sharer copied, of key k.
type entry struct {
	k    key
	part weak.Pointer[byte]
}

// lookup returns the part of key k the sharer copied, nil if none is
// alive.
func (s *sharer) lookup(k key) *byte {
	e, ok := s.seen[k.slot()]
	if !ok || e.k != k {
		return nil
	}
	return e.part.Value()
}

// share makes the value of s's type at obj point at equal parts seen
// before.
func (s *sharer) share(obj unsafe.Pointer) {
	if s.plan == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objects++
	s.walk(s.plan, obj)
	if len(s.mine) > mineMax {
		s.mine = map[key]*byte{}
	} else {
		clear(s.mine)
	}
}

// mineMax is the most entries of mine kept for the next object (clearing
// costs what the map holds room for).
const mineMax = 256

// walk shares the parts of the value of p's type at at. Each store
// compares first, so memory that is already shared is never written.
func (s *sharer) walk(p *plan, at unsafe.Pointer) {
	switch p.kind {
	case kindString:
		str := (*string)(at)
		seen := s.string(*str)
		if unsafe.StringData(seen) != unsafe.StringData(*str) {
			*str = seen
		}
	case kindStringMap:
		m := (*map[string]string)(at)
		seen := shareMap(s, p, *m)
		if !sameMap(seen, *m) {
			*m = seen
		}
	case kindResourceList:
		m := (*corev1.ResourceList)(at)
		seen := shareMap(s, p, *m)
		if !sameMap(seen, *m) {
			*m = seen
		}
	case kindQuantity:
		// Readers make the canonical string (String, Size): make it
		// while the Quantity is ours, and share it like any string.
		_ = (*resource.Quantity)(at).String()
		if quantityString != 0 {
			str := unsafe.Add(at, quantityString)
			s.walk(stringPlan, str)
		}
	case kindStruct:
		for _, f := range p.fields {
			s.walk(f.plan, unsafe.Add(at, f.offset))
		}
	case kindPointer:
		ptr := (*unsafe.Pointer)(at)
		if *ptr == nil {
			return
		}
		s.walkBlock(p, *ptr, 1)
		seen := s.block(p, *ptr, 1)
		if seen != *ptr {
			*ptr = seen
		}
	case kindSlice:
		h := (*sliceHeader)(at)
		if h.len == 0 {
			return
		}
		s.walkBlock(p, h.data, h.len)
		seen := s.block(p, h.data, h.len)
		if seen == h.data && spare(p, h) {
			seen = copyBlock(p, h.data, h.len)
		}
		if seen != h.data || h.cap != h.len {
			h.data = seen
			h.cap = h.len // every header of a block alike
		}
	}
}

type sliceHeader struct {
	data unsafe.Pointer
	len  int
	cap  int
}

// walkBlock shares the parts of the n elements at at and zeroes their
// padding.
func (s *sharer) walkBlock(p *plan, at unsafe.Pointer, n int) {
	size := p.typ.Size()
	for i := range n {
		elem := unsafe.Add(at, uintptr(i)*size)
		if p.elem != nil {
			s.walk(p.elem, elem)
		}
		for _, h := range p.holes {
			start := (*byte)(unsafe.Add(elem, h.offset))
			hole := unsafe.Slice(start, h.size)
			if slices.ContainsFunc(hole, nonzero) {
				clear(hole)
			}
		}
	}
}

func nonzero(b byte) bool { return b != 0 }

// string returns an equal string seen before, or a remembered copy of str.
func (s *sharer) string(str string) string {
	if str == "" {
		return str
	}
	h := maphash.String(s.seed, str)
	k := key{stringPlan, h, uintptr(len(str))}
	seen := s.lookup(k)
	if seen != nil && unsafe.String(seen, len(str)) == str {
		return unsafe.String(seen, len(str))
	}
	if !s.again(k) {
		return s.own(k, str)
	}
	c := strings.Clone(str)
	s.remember(k, unsafe.StringData(c))
	return c
}

// own returns an equal string the object being shared holds already, or
// str, which the object holds from now on.
func (s *sharer) own(k key, str string) string {
	at, ok := s.mine[k]
	if ok && unsafe.String(at, len(str)) == str {
		return unsafe.String(at, len(str))
	}
	s.mine[k] = unsafe.StringData(str)
	return str
}

// block returns the memory of n earlier elements of p's type equal to the
// n at at, or a remembered copy of them.
func (s *sharer) block(p *plan, at unsafe.Pointer, n int) unsafe.Pointer {
	size := uintptr(n) * p.typ.Size()
	b := unsafe.Slice((*byte)(at), size)
	k := key{p, maphash.Bytes(s.seed, b), size}
	seen := s.lookup(k)
	if seen != nil && bytes.Equal(unsafe.Slice(seen, size), b) {
		return unsafe.Pointer(seen)
	}
	if !s.again(k) {
		return at
	}
	c := copyBlock(p, at, n)
	s.remember(k, (*byte)(c))
	return c
}

// copyBlock returns a copy of the n elements of p's type at at, in memory
// of its own.
func copyBlock(p *plan, at unsafe.Pointer, n int) unsafe.Pointer {
	// Typed memory: the collector sees the copy's pointers.
	c := reflect.MakeSlice(p.slice, n, n)
	h := &sliceHeader{data: at, len: n, cap: n}
	old := reflect.NewAt(p.slice, unsafe.Pointer(h))
	reflect.Copy(c, old.Elem())
	return c.UnsafePointer()
}

// spareMin is the spare capacity, in bytes, worth a copy of a slice's
// elements that is only as long as they are.
const spareMin = 64

// spare says whether the slice h of p's type has at least spareMin bytes
// of spare capacity: a decoder that appends leaves up to as much again as
// its elements (5 conditions of a Pod in room for 8).
func spare(p *plan, h *sliceHeader) bool {
	bytes := uintptr(h.cap-h.len) * p.typ.Size()
	return bytes >= spareMin
}

// shareMap returns an equal map seen before, or a remembered copy of m.
// Maps are found by a hash of their entries that ignores their order.
func shareMap[K ~string, V comparable](s *sharer, p *plan, m map[K]V) map[K]V {
	if len(m) == 0 {
		return m
	}
	h := uint64(0)
	for k, v := range m {
		hk := maphash.String(s.seed, string(k))
		hv := maphash.Comparable(s.seed, v)
		h += (hk ^ hv*0x9e3779b97f4a7c15) * 0xff51afd7ed558ccd
	}
	k := key{p, h, uintptr(len(m))}
	seen := s.lookup(k)
	if seen != nil {
		old := *(*map[K]V)(unsafe.Pointer(&seen))
		if maps.Equal(old, m) {
			return old
		}
	}
	if !s.again(k) {
		return m
	}
	c := maps.Clone(m)
	s.remember(k, *(**byte)(unsafe.Pointer(&c)))
	return c
}

// sameMap says whether a and b are the same map, not just equal ones.
func sameMap[M ~map[K]V, K comparable, V any](a, b M) bool {
	pa := *(*unsafe.Pointer)(unsafe.Pointer(&a))
	pb := *(*unsafe.Pointer)(unsafe.Pointer(&b))
	return pa == pb
}

// again says whether a part of key k, not found in seen, is worth
// remembering: only when it is seen again, so that the many values unique
// to one object (its IP, its container IDs) cost no entry in seen.
func (s *sharer) again(k key) bool {
	h := k.slot()
	obj, ok := s.once[h]
	if ok && obj != s.objects {
		return true
	}
	if len(s.once) >= onceMax {
		clear(s.once)
	}
	s.once[h] = s.objects
	return false
}

// remember makes k find c, a copy the sharer made, as long as c lives, and
// drops the entries of freed parts once seen has doubled since the last
// sweep.
func (s *sharer) remember(k key, c *byte) {
	s.seen[k.slot()] = entry{k, weak.Make(c)}
	if len(s.seen) < 2*s.swept+1024 {
		return
	}
	maps.DeleteFunc(s.seen, freed)
	s.swept = len(s.seen)
}

// freed says whether the part an entry of seen points at was freed.
func freed(_ uint64, e entry) bool {
	return e.part.Value() == nil
}
