package index

// How a store answers a List from its plan: the walk over its objects
// by namespace and name, each object checked against the whole selector;
// and those maps' first allocation (Presize).

import "k8s.io/apimachinery/pkg/labels"

// List returns the objects of objs (a store's, by namespace, "" if
// cluster-scoped, then name) that p walks and that match it (keeps); obj
// reads the object of a stored E. It returns nil if p.None.
func List[K comparable, O, E any](
	p *Plan[K, O],
	objs map[string]map[string]E,
	obj func(e E) O,
) []O {
	if p.None {
		return nil
	}
	var out []O
	all := p.sel == nil && len(p.fields) == 0 // each object walked matches
	namespace := p.Namespace
	switch {
	case p.Name != "":
		for ns, inner := range objs {
			e, ok := inner[p.Name]
			if !ok || (namespace != "" && ns != namespace) {
				continue
			}
			o := obj(e)
			if all || p.keeps(ns, p.Name, o) {
				out = append(out, o)
			}
		}
	case p.Index != nil:
		for _, v := range p.Values {
			for k := range p.Index.Keys(v) {
				ns, name := p.set.split(k)
				if namespace != "" && ns != namespace {
					continue
				}
				o := obj(objs[ns][name])
				if all || p.keeps(ns, name, o) {
					out = append(out, o)
				}
			}
		}
	case namespace != "":
		out = make([]O, 0, len(objs[namespace]))
		for name, e := range objs[namespace] {
			o := obj(e)
			if all || p.keeps(namespace, name, o) {
				out = append(out, o)
			}
		}
	default:
		n := 0
		for _, inner := range objs {
			n += len(inner)
		}
		out = make([]O, 0, n)
		for ns, inner := range objs {
			for name, e := range inner {
				o := obj(e)
				if all || p.keeps(ns, name, o) {
					out = append(out, o)
				}
			}
		}
	}
	return out
}

// keeps reports whether obj, stored as namespace/name, matches p's label
// selector and meets every field requirement of p.
func (p *Plan[K, O]) keeps(namespace, name string, obj O) bool {
	if p.sel != nil && !p.sel.Matches(labels.Set(p.set.labels(obj))) {
		return false
	}
	for _, f := range p.fields {
		var in bool
		switch {
		case f.Index != nil:
			in = f.Index.Has(f.Value, p.set.key(namespace, name))
		case f.Field == "metadata.name":
			in = name == f.Value
		default:
			in = namespace == f.Value
		}
		if in != f.Equal {
			return false
		}
	}
	return true
}

// Presize makes, in objs (a store's, as List reads them), the map of
// each namespace that has none and that some of list (each of
// namespace ns) go in, as large as their count: the first list of a
// store allocates each namespace's map once, not at each doubling.
func Presize[O, E any](
	objs map[string]map[string]E,
	list []O,
	ns func(o O) string,
) {
	sizes := map[string]int{}
	for _, o := range list {
		sizes[ns(o)]++
	}
	for n, size := range sizes {
		if objs[n] == nil {
			objs[n] = make(map[string]E, size)
		}
	}
}
