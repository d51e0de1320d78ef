package share

import (
	"reflect"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A plan says where in a value of one Go type the shareable parts are,
// worked out once per type by reflection.
//
// fields are a struct's fields with something to share. For a pointer or
// a slice, elem is the element's plan (nil if it has nothing to share),
// typ the element's type, slice []typ (the type of the sharer's copies)
// and holes the padding bytes in an element.
type plan struct {
	kind   planKind
	fields []field
	elem   *plan
	typ    reflect.Type
	slice  reflect.Type
	holes  []span
}

// A field is a struct field with something to share, at offset.
type field struct {
	offset uintptr
	plan   *plan
}

// A span is size bytes at offset in a value.
type span struct {
	offset uintptr
	size   uintptr
}

type planKind uint8

const (
	kindString planKind = iota
	kindStringMap
	kindResourceList
	kindQuantity
	kindStruct
	kindPointer
	kindSlice
)

// stringPlan is the plan of every string type: equal strings share
// whatever their Go type.
var stringPlan = &plan{kind: kindString}

// The types with a plan of their own kind.
var (
	stringMapType    = reflect.TypeFor[map[string]string]()
	resourceListType = reflect.TypeFor[corev1.ResourceList]()
	quantityType     = reflect.TypeFor[resource.Quantity]()
	objectMetaType   = reflect.TypeFor[metav1.ObjectMeta]()
)

// quantityString is where a Quantity keeps its canonical string; 0 if this
// version of apimachinery keeps it elsewhere (then it is not shared).
var quantityString = func() uintptr {
	f, ok := quantityType.FieldByName("s")
	if !ok || f.Type != reflect.TypeFor[string]() {
		return 0
	}
	return f.Offset
}()

// unique names ObjectMeta's fields whose values are unique to each object:
// they are never remembered.
var unique = map[string]bool{
	"Name":            true,
	"UID":             true,
	"ResourceVersion": true,
	"SelfLink":        true,
}

// plans holds each type's plan (nil: nothing to share), built whole under
// plansMu: a recursive type's plan is incomplete while it is built.
var (
	plansMu sync.Mutex
	plans   = map[reflect.Type]*plan{}
)

// planFor returns t's plan, nil if t holds nothing to share.
func planFor(t reflect.Type) *plan {
	plansMu.Lock()
	defer plansMu.Unlock()
	building := map[reflect.Type]*plan{}
	return planOf(t, building)
}

// planOf returns t's plan, nil if t holds nothing to share. building holds
// the plans being built, of the types t is part of. Call it with plansMu
// held.
//
// A Quantity gets its canonical string made and shared, then is compared
// whole.
func planOf(t reflect.Type, building map[reflect.Type]*plan) *plan {
	if p, ok := plans[t]; ok {
		return p
	}
	if p, ok := building[t]; ok { // a recursive type
		return p
	}
	var p *plan
	switch {
	case t == stringMapType:
		p = &plan{kind: kindStringMap}
	case t == resourceListType:
		p = &plan{kind: kindResourceList}
	case t.Kind() == reflect.String:
		p = stringPlan
	case t == quantityType:
		p = &plan{kind: kindQuantity}
	case t.Kind() == reflect.Pointer:
		p = indirectPlan(t, building)
	case t.Kind() == reflect.Slice:
		p = indirectPlan(t, building)
	case t.Kind() == reflect.Struct:
		p = structPlan(t, building)
	}
	delete(building, t)
	plans[t] = p
	return p
}

// indirectPlan is planOf for a pointer or slice type: nil if its element
// takes no memory.
func indirectPlan(t reflect.Type, building map[reflect.Type]*plan) *plan {
	e := t.Elem()
	if e.Size() == 0 {
		return nil
	}
	p := &plan{kind: kindPointer}
	if t.Kind() == reflect.Slice {
		p.kind = kindSlice
	}
	p.typ = e
	p.slice = reflect.SliceOf(e)
	p.holes = holesOf(e, 0, nil)
	building[t] = p
	p.elem = planOf(e, building)
	return p
}

// structPlan is planOf for a struct type: nil if no field has anything to
// share. Only exported fields are walked (the bytes of the others still
// count when their struct is compared).
func structPlan(t reflect.Type, building map[reflect.Type]*plan) *plan {
	p := &plan{kind: kindStruct}
	building[t] = p
	for i := range t.NumField() {
		f := t.Field(i)
		if !walked(t, f) {
			continue
		}
		fp := planOf(f.Type, building)
		if fp == nil {
			continue
		}
		p.fields = append(p.fields, field{f.Offset, fp})
	}
	if len(p.fields) == 0 {
		return nil
	}
	return p
}

// walked says whether field f of struct type t is walked: it is exported,
// and not one of ObjectMeta's unique fields.
func walked(t reflect.Type, f reflect.StructField) bool {
	if !f.IsExported() {
		return false
	}
	return t != objectMetaType || !unique[f.Name]
}

// holesOf appends to holes the padding bytes of a value of type t at
// offset.
func holesOf(t reflect.Type, offset uintptr, holes []span) []span {
	switch t.Kind() {
	case reflect.Struct:
		end := uintptr(0)
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Offset > end {
				gap := span{offset + end, f.Offset - end}
				holes = append(holes, gap)
			}
			holes = holesOf(f.Type, offset+f.Offset, holes)
			end = f.Offset + f.Type.Size()
		}
		if t.Size() > end {
			tail := span{offset + end, t.Size() - end}
			holes = append(holes, tail)
		}
	case reflect.Array:
		size := t.Elem().Size()
		for i := range t.Len() {
			at := offset + uintptr(i)*size
			holes = holesOf(t.Elem(), at, holes)
		}
	}
	return holes
}
