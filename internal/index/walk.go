package index

// How a store answers a List from its plan: the walk over its objects
// by namespace and name, each object checked against the whole selector.

import "k8s.io/apimachinery/pkg/labels"

// List returns the objects of objs (a store's, by namespace, "" if
// cluster-scoped, then name) that p walks and that match it (Matches);
// obj reads the object of a stored E. It returns nil if p.None.
func List[K comparable, O, E any](
	p Plan[K, O],
	objs map[string]map[string]E,
	obj func(e E) O,
) []O {
	if p.None {
		return nil
	}
	var out []O
	match := func(k K, e E) {
		o := obj(e)
		if p.Matches(k, o) {
			out = append(out, o)
		}
	}
	namespace := p.Namespace
	switch {
	case p.Name != "":
		for ns, inner := range objs {
			e, ok := inner[p.Name]
			if ok && (namespace == "" || ns == namespace) {
				match(p.set.key(ns, p.Name), e)
			}
		}
	case p.Index != nil:
		for _, v := range p.Values {
			for k := range p.Index.Keys(v) {
				ns, name := p.set.split(k)
				if namespace == "" || ns == namespace {
					match(k, objs[ns][name])
				}
			}
		}
	case namespace != "":
		out = make([]O, 0, len(objs[namespace]))
		for name, e := range objs[namespace] {
			match(p.set.key(namespace, name), e)
		}
	default:
		n := 0
		for _, inner := range objs {
			n += len(inner)
		}
		out = make([]O, 0, n)
		for ns, inner := range objs {
			for name, e := range inner {
				match(p.set.key(ns, name), e)
			}
		}
	}
	return out
}

// Matches reports whether obj, stored under k, matches p's label selector
// and meets every field requirement of p.
func (p Plan[K, O]) Matches(k K, obj O) bool {
	if p.sel != nil && !p.sel.Matches(labels.Set(p.set.labels(obj))) {
		return false
	}
	for _, f := range p.fields {
		if !f.meets(k, p.set.split) {
			return false
		}
	}
	return true
}

// meets reports whether the object stored under k meets f; split takes k
// apart into namespace and name.
func (f Field[K, O]) meets(
	k K,
	split func(k K) (namespace, name string),
) bool {
	var in bool
	switch {
	case f.Index != nil:
		in = f.Index.Has(f.Value, k)
	case f.Field == "metadata.name":
		_, name := split(k)
		in = name == f.Value
	default:
		namespace, _ := split(k)
		in = namespace == f.Value
	}
	return in == f.Equal
}
