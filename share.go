package kctl

// Sharing: the cache keeps one copy of what many of its objects hold alike.
// The Pods of one workload carry the same labels, image, env, mount paths and
// the same requests and limits; decoded, each Pod holds its own copy of every
// one of them, which is most of a cached Pod's memory. Before an object is
// stored, a sharer replaces each string, label map (map[string]string) and
// resource list it holds by an equal one it has seen before, so the copies
// decoded for this object become garbage. Cached objects are read-only by
// contract (see Informer.Get), which is what makes sharing safe; readers that
// modify get deep copies (Client, Reconcile).

import (
	"hash/maphash"
	"maps"
	"reflect"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// shareGeneration is how many values a sharer remembers of each kind before
// it starts a new generation; values used in the last two generations stay,
// so a stream of unique values (names, IPs) cannot grow it without bound.
const shareGeneration = 8192

// sharer replaces parts of objects of one Go type by equal parts of objects
// it saw before. Safe for concurrent use (an informer's watches share it).
type sharer struct {
	mu    sync.Mutex
	plan  *sharePlan // nil: the type has nothing to share
	seed  maphash.Seed
	strs  generations[string, string]
	smaps generations[uint64, map[string]string]
	lists generations[uint64, map[corev1.ResourceName]resource.Quantity]
}

func newSharer[T any]() *sharer {
	return &sharer{plan: sharePlanOf(reflect.TypeFor[T](), map[reflect.Type]*sharePlan{}), seed: maphash.MakeSeed()}
}

// share makes obj's strings, string maps and resource lists the ones seen
// before, where equal. obj must not be shared with anyone yet.
func (s *sharer) share(obj any) {
	if s.plan == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.walk(s.plan, reflect.ValueOf(obj).Elem())
}

func (s *sharer) walk(p *sharePlan, v reflect.Value) {
	if p == nil { // a recursive type's part with nothing to share
		return
	}
	switch p.kind {
	case shareString:
		if str := v.String(); str != "" {
			if seen, ok := s.strs.get(str); ok {
				v.SetString(seen)
			} else {
				s.strs.put(str, str)
			}
		}
	case shareStringMap:
		if m := v.Interface().(map[string]string); len(m) > 0 {
			v.Set(reflect.ValueOf(shareMap(s, &s.smaps, m)))
		}
	case shareResourceList:
		if m := v.Interface().(corev1.ResourceList); len(m) > 0 {
			v.Set(reflect.ValueOf(corev1.ResourceList(shareMap(s, &s.lists, m))))
		}
	case shareStruct:
		for _, f := range p.fields {
			s.walk(f.plan, v.Field(f.index))
		}
	case sharePointer:
		if !v.IsNil() {
			s.walk(p.elem, v.Elem())
		}
	case shareSlice:
		for i := range v.Len() {
			s.walk(p.elem, v.Index(i))
		}
	}
}

// shareMap returns the map seen before that equals m, or m, remembered.
// Maps are found by a hash of their entries that ignores their order.
func shareMap[K ~string, V comparable](s *sharer, g *generations[uint64, map[K]V], m map[K]V) map[K]V {
	h := uint64(len(m))
	for k, v := range m {
		h += (maphash.String(s.seed, string(k)) ^ maphash.Comparable(s.seed, v)*0x9e3779b97f4a7c15) * 0xff51afd7ed558ccd
	}
	if seen, ok := g.get(h); ok && maps.Equal(seen, m) {
		return seen
	}
	g.put(h, m)
	return m
}

// generations is a map that forgets what was not used in the last two
// generations of shareGeneration entries each.
type generations[K comparable, V any] struct{ cur, prev map[K]V }

func (g *generations[K, V]) get(k K) (V, bool) {
	if v, ok := g.cur[k]; ok {
		return v, true
	}
	v, ok := g.prev[k]
	if ok {
		g.put(k, v)
	}
	return v, ok
}

func (g *generations[K, V]) put(k K, v V) {
	if g.cur == nil || len(g.cur) >= shareGeneration {
		g.prev, g.cur = g.cur, make(map[K]V, len(g.cur))
	}
	g.cur[k] = v
}

// A sharePlan says where in a value of one Go type the shareable parts are,
// worked out once per type so that sharing an object visits only them.
type sharePlan struct {
	kind   shareKind
	fields []shareField // shareStruct: the fields with something to share
	elem   *sharePlan   // sharePointer, shareSlice
}

type shareField struct {
	index int
	plan  *sharePlan
}

type shareKind uint8

const (
	shareString shareKind = iota
	shareStringMap
	shareResourceList
	shareStruct
	sharePointer
	shareSlice
)

var sharePlans sync.Map // reflect.Type -> *sharePlan (nil: nothing to share)

// sharePlanOf returns t's plan, nil if t holds nothing to share. Exported
// fields only; ObjectMeta's name, uid and resourceVersion are unique to each
// object and left alone; a Quantity is shared only as part of a ResourceList.
func sharePlanOf(t reflect.Type, building map[reflect.Type]*sharePlan) *sharePlan {
	if p, ok := sharePlans.Load(t); ok {
		return p.(*sharePlan)
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
	case t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice:
		p = &sharePlan{kind: sharePointer}
		if t.Kind() == reflect.Slice {
			p.kind = shareSlice
		}
		building[t] = p
		if p.elem = sharePlanOf(t.Elem(), building); p.elem == nil {
			p = nil
		}
	case t.Kind() == reflect.Struct && t != reflect.TypeFor[resource.Quantity]():
		p = &sharePlan{kind: shareStruct}
		building[t] = p
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() || t == reflect.TypeFor[metav1.ObjectMeta]() &&
				(f.Name == "Name" || f.Name == "UID" || f.Name == "ResourceVersion" || f.Name == "SelfLink") {
				continue
			}
			if fp := sharePlanOf(f.Type, building); fp != nil {
				p.fields = append(p.fields, shareField{i, fp})
			}
		}
		if len(p.fields) == 0 {
			p = nil
		}
	}
	delete(building, t)
	sharePlans.Store(t, p)
	return p
}
