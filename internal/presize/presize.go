// Package presize decodes protobuf into k8s.io/api objects with each
// repeated field's slice made once, as long as the message's count of it.
//
// The generated Unmarshal of a k8s.io/api type appends each element of a
// repeated field to its slice as it comes, so a slice is reallocated at 1,
// 2, 4, 8 elements: a Pod's 5 conditions cost 15 elements of memory, and
// leave room for 8. On the initial sync of a cache of varied Pods that
// growth was a third of all the memory allocated (issue 24). A Plan
// counts each repeated field of a message in its wire bytes first, makes
// its slice with exactly that room, and lets the generated Unmarshal
// append into it; it decodes by itself only the fields on the way to a
// nested repeated field (a Pod's spec, its containers), and hands every
// other run of fields to the generated code, which merges.
//
//	plan := presize.For(reflect.TypeFor[corev1.Pod]())
//	pod := new(corev1.Pod)
//	err := plan.Unmarshal(pod, raw) // as pod.Unmarshal(raw)
//
// The result equals the generated Unmarshal's, field for field; only the
// slices' capacities differ. A Plan is immutable and safe for concurrent
// use.
//
// With a Memo (UnmarshalMemo), objects decoded one after another share
// the maps they hold alike: a message of a planned type that decodes to
// maps alone (a container's resources: limits and requests) is decoded
// once for each distinct run of bytes, and given again to every later
// object with the same bytes. Such objects must then be read-only, as a
// cache's are.
package presize

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/kctl-dev/kctl/internal/protowire"
)

// Unmarshaler is a pointer to a generated protobuf message.
type Unmarshaler interface {
	Unmarshal([]byte) error
}

// maxFields bounds the fields a Plan handles in one message type, so that
// their counts fit an array on the stack; a type's further ones are
// decoded, and grown, by the generated code alone.
const maxFields = 48

// lengthDelimited is the wire type of messages, strings and bytes.
const lengthDelimited = 2

// Plan is how to decode one message type with its slices sized once.
// A nil *Plan decodes with the generated Unmarshal alone.
type Plan struct {
	// fields are the type's repeated fields and the singular messages
	// whose type has a plan, at most maxFields.
	fields []field
	// byNum is the index in fields of protobuf field number n, or -1.
	byNum []int8
	// nested: some field has a plan of its own, so the message is
	// decoded field by field, not in one call.
	nested bool
	// maps: the type's fields are maps and slices, some of them maps, so
	// a value may be maps alone, and a Memo may remember it.
	maps bool
	// repeats: some field is repeated, so size has slices to make.
	repeats bool
}

// field is one field of a Plan's type.
type field struct {
	// index is the Go field's index in the struct.
	index int
	// repeated: a slice of strings or of messages; else a message (ptr:
	// a pointer to one).
	repeated bool
	ptr      bool
	// plan is the element's or message's plan; nil for a repeated field
	// whose elements the generated code decodes alone.
	plan *Plan
}

var unmarshaler = reflect.TypeFor[Unmarshaler]()

// For returns the plan of struct type t (whose pointer is a generated
// message), or nil if t has no repeated field to size, itself or below.
// A type's plan is made once (about half a millisecond for a Pod) and
// kept for the process's life, like the types themselves.
func For(t reflect.Type) *Plan {
	known, ok := plans.Load(t)
	if ok {
		return known.(*Plan)
	}
	p := planOf(t, map[reflect.Type]bool{})
	known, _ = plans.LoadOrStore(t, p)
	return known.(*Plan)
}

// Of is For of the struct type obj points to: obj is a pointer to a
// generated message, e.g. a *corev1.Pod.
func Of(obj any) *Plan {
	return For(reflect.TypeOf(obj).Elem())
}

// plans holds For's plan (perhaps nil) of each type asked for.
var plans sync.Map

// planOf is For; open holds the types being planned, so a type that
// holds itself is decoded there by the generated code alone.
func planOf(t reflect.Type, open map[reflect.Type]bool) *Plan {
	if t.Kind() != reflect.Struct || open[t] {
		return nil
	}
	if !reflect.PointerTo(t).Implements(unmarshaler) {
		return nil
	}
	open[t] = true
	defer delete(open, t)
	p := &Plan{}
	hasMaps := false
	onlyMapsAndSlices := true
	for i := range t.NumField() {
		sf := t.Field(i)
		switch sf.Type.Kind() {
		case reflect.Map:
			hasMaps = true
		case reflect.Slice:
		default:
			onlyMapsAndSlices = false
		}
		num, ok := tag(sf)
		if !ok || len(p.fields) == maxFields {
			continue
		}
		f := field{index: i}
		ft := sf.Type
		switch ft.Kind() {
		case reflect.Map:
			continue
		case reflect.Slice:
			// A tag may say "opt" of a slice (Claims of
			// ResourceRequirements): the Go type decides.
			f.repeated = true
			e := ft.Elem()
			if e.Kind() == reflect.Struct {
				f.plan = planOf(e, open)
			} else if e.Kind() != reflect.String {
				continue // bytes
			}
		case reflect.Struct:
			f.plan = planOf(ft, open)
		case reflect.Pointer:
			f.ptr = true
			f.plan = planOf(ft.Elem(), open)
		}
		if !f.repeated && f.plan == nil {
			continue
		}
		p.nested = p.nested || f.plan != nil
		p.repeats = p.repeats || f.repeated
		p.add(num, f)
	}
	if len(p.fields) == 0 {
		return nil
	}
	p.maps = hasMaps && onlyMapsAndSlices
	return p
}

// tag reads a field's protobuf tag, e.g. "bytes,2,rep,name=containers":
// its number; ok only for a length-delimited field (a message, string,
// bytes, map or packed list).
func tag(sf reflect.StructField) (num int, ok bool) {
	parts := strings.Split(sf.Tag.Get("protobuf"), ",")
	if len(parts) < 2 || parts[0] != "bytes" {
		return 0, false
	}
	num, err := strconv.Atoi(parts[1])
	if err != nil || num <= 0 || num > 1<<12 {
		return 0, false
	}
	return num, true
}

// add records f as protobuf field number num.
func (p *Plan) add(num int, f field) {
	for len(p.byNum) <= num {
		p.byNum = append(p.byNum, -1)
	}
	p.byNum[num] = int8(len(p.fields))
	p.fields = append(p.fields, f)
}

// Unmarshal decodes b into msg, a pointer to p's type, as
// msg.Unmarshal(b) does (merging into what msg holds).
func (p *Plan) Unmarshal(msg Unmarshaler, b []byte) error {
	return p.UnmarshalMemo(nil, msg, b)
}

// UnmarshalMemo is Unmarshal that takes from m, and adds to it, the
// messages that decode to maps alone (see Memo); m may be nil.
func (p *Plan) UnmarshalMemo(m *Memo, msg Unmarshaler, b []byte) error {
	if p == nil {
		return msg.Unmarshal(b)
	}
	v := reflect.ValueOf(msg).Elem()
	return p.decode(m, v, b)
}

// UnmarshalObject decodes raw, an object's own bytes (no envelope), into
// obj with UnmarshalMemo (p and m may be nil); with skipManagedFields,
// around obj's metadata.managedFields (protowire.Unmarshal). obj must be
// a protowire.Message: else it is an error.
func (p *Plan) UnmarshalObject(
	m *Memo,
	obj any,
	raw []byte,
	skipManagedFields bool,
) error {
	msg, ok := obj.(protowire.Message)
	if !ok {
		return errors.New("the server sent protobuf " +
			"for a type without protobuf support")
	}
	decode := func(b []byte) error {
		return p.UnmarshalMemo(m, msg, b)
	}
	return protowire.Unmarshal(obj, raw, skipManagedFields, decode)
}

// at returns the plan's field of protobuf field number num, if any.
func (p *Plan) at(num int) (field, bool) {
	if num >= len(p.byNum) || p.byNum[num] < 0 {
		return field{}, false
	}
	return p.fields[p.byNum[num]], true
}

// decode decodes b into v, an addressable value of p's type: it sizes the
// slices, then decodes.
func (p *Plan) decode(m *Memo, v reflect.Value, b []byte) error {
	if p.repeats {
		p.size(v, b)
	}
	if !p.nested {
		return generated(v, b)
	}
	run := b
	rest := b
	for len(rest) > 0 {
		num, wire, val, next, err := protowire.Next(rest)
		if err != nil {
			break // the generated code reports it
		}
		f, ok := p.at(num)
		if !ok || f.plan == nil || wire != lengthDelimited {
			rest = next
			continue
		}
		before := run[:len(run)-len(rest)]
		err = generated(v, before)
		if err != nil {
			return err
		}
		err = f.decode(m, v.Field(f.index), val)
		if err != nil {
			return err
		}
		run = next
		rest = next
	}
	return generated(v, run)
}

// size counts the repeated fields in b and makes room in v's slices for
// as many more elements.
func (p *Plan) size(v reflect.Value, b []byte) {
	var counts [maxFields]int
	for len(b) > 0 {
		num, wire, _, next, err := protowire.Next(b)
		if err != nil {
			break
		}
		f, ok := p.at(num)
		if ok && f.repeated && wire == lengthDelimited {
			counts[p.byNum[num]]++
		}
		b = next
	}
	for i, f := range p.fields {
		if counts[i] == 0 {
			continue
		}
		s := v.Field(f.index)
		s.Grow(counts[i])
	}
}

// decode decodes val, one occurrence of f, into fv, f's Go field.
func (f field) decode(m *Memo, fv reflect.Value, val []byte) error {
	switch {
	case f.repeated:
		n := fv.Len()
		fv.Grow(1) // a no-op: size made the room
		fv.SetLen(n + 1)
		e := fv.Index(n)
		e.SetZero()
		return f.plan.decode(m, e, val)
	case f.ptr:
		if fv.IsNil() {
			fv.Set(reflect.New(fv.Type().Elem()))
		}
		return f.plan.decode(m, fv.Elem(), val)
	case m == nil || !f.plan.maps:
		return f.plan.decode(m, fv, val)
	case !fv.IsZero():
		// A second occurrence, which merges: into maps of its own,
		// as the first one's may be a Memo's.
		cloneMaps(fv)
		return f.plan.decode(m, fv, val)
	}
	// In a struct, zero so far: a value of the memo is all it will hold.
	return m.decode(f.plan, fv, val)
}

// generated decodes b into v with v's generated Unmarshal.
func generated(v reflect.Value, b []byte) error {
	if len(b) == 0 {
		return nil
	}
	m := v.Addr().Interface().(Unmarshaler)
	return m.Unmarshal(b)
}

// memoMax bounds the values a Memo holds: once full, it remembers no more.
const memoMax = 1024

// Memo holds the messages decoded to maps alone, by their plan and their
// bytes, for UnmarshalMemo. It is for one goroutine, and for a bounded
// while (the decoding of one list, or of a watch's initial events): what
// it holds stays alive as long as it does, at most memoMax values.
type Memo struct {
	// seen is the value each run of bytes decoded to, by plan; every
	// value is maps alone, read-only once here.
	seen map[*Plan]map[string]reflect.Value
	// n is the values in seen.
	n int
}

// NewMemo returns an empty Memo.
func NewMemo() *Memo {
	return &Memo{seen: map[*Plan]map[string]reflect.Value{}}
}

// decode decodes b into fv, a zero value of p's type: as an earlier
// value of the same bytes if m has one, else by p, remembering the
// result if it is maps alone.
func (m *Memo) decode(p *Plan, fv reflect.Value, b []byte) error {
	byBytes := m.seen[p]
	old, ok := byBytes[string(b)]
	if ok {
		fv.Set(old)
		return nil
	}
	err := p.decode(m, fv, b)
	if err != nil || m.n == memoMax || !mapsAlone(fv) {
		return err
	}
	if byBytes == nil {
		byBytes = map[string]reflect.Value{}
		m.seen[p] = byBytes
	}
	keep := reflect.New(fv.Type()).Elem()
	keep.Set(fv)
	byBytes[string(b)] = keep
	m.n++
	return nil
}

// cloneMaps gives each map field of struct v a copy of its own.
func cloneMaps(v reflect.Value) {
	for i := range v.NumField() {
		f := v.Field(i)
		if f.Kind() != reflect.Map || f.IsNil() {
			continue
		}
		c := reflect.MakeMapWithSize(f.Type(), f.Len())
		it := f.MapRange()
		for it.Next() {
			c.SetMapIndex(it.Key(), it.Value())
		}
		f.Set(c)
	}
}

// mapsAlone says whether every field of struct v is a map or zero.
func mapsAlone(v reflect.Value) bool {
	for i := range v.NumField() {
		f := v.Field(i)
		if f.Kind() != reflect.Map && !f.IsZero() {
			return false
		}
	}
	return true
}
