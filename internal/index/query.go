package index

// How a store answers a List from its indexes: the field requirements
// with the index of each, and the plan of the walk, which reads the
// fewest objects it can.

import "k8s.io/apimachinery/pkg/labels"

// Field is one requirement of a field selector that a store answers by
// an object's key: Index is the index named Req.Field; nil for
// metadata.name and metadata.namespace.
type Field[K comparable, O any] struct {
	Req
	Index *Index[K, O]
}

// Fields parses selector for a List of a store whose objects were all
// listed with the field selector scope (see Parse). A field not
// metadata.name, metadata.namespace nor the name of one of s's indexes
// goes in unknown. The requirements point at s's indexes: read them
// under the store's lock.
func (s *Set[K, O]) Fields(
	selector, scope string,
) (fs []Field[K, O], unknown []string, err error) {
	parsed, err := Parse(selector, scope)
	if err != nil {
		return nil, nil, err
	}
	for _, r := range parsed {
		f := Field[K, O]{Req: r}
		byKey := r.Field == "metadata.name" ||
			r.Field == "metadata.namespace"
		if !byKey {
			f.Index = s.Get(r.Field)
		}
		if !byKey && f.Index == nil {
			unknown = append(unknown, r.Field)
			continue
		}
		fs = append(fs, f)
	}
	return fs, unknown, nil
}

// Plan is how a store walks its objects for a List (see List), each then
// checked against the whole selector: the objects named Name, if set;
// else the keys Index files under Values, if set; else those of
// Namespace ("" for all). None: nothing can match (two namespaces are
// required).
type Plan[K comparable, O any] struct {
	Name      string
	Namespace string
	None      bool
	Index     *Index[K, O]
	Values    []string
	// the List's selector (nil matches all) and field requirements, and
	// the Set that planned it (for its labels, key and split).
	sel    labels.Selector
	fields []Field[K, O]
	set    *Set[K, O]
}

// Plan plans a List of namespace ("" for all) whose labels match sel (nil
// matches all) and that meet every field requirement. A name required to
// equal a value is looked up; else a requirement that a label (key=value,
// key in (...)) or an indexed field equal a value is answered from the
// narrowest index, so a List costs what it returns, not the size of the
// namespace. The first such List of a label key returns missing = that
// key instead, for the caller to build the index under its write lock
// (AddLabel) and ask again, until nothing is missing.
func (s *Set[K, O]) Plan(
	namespace string,
	sel labels.Selector,
	fs []Field[K, O],
) (p Plan[K, O], missing string) {
	if sel != nil && sel.Empty() {
		sel = nil
	}
	p.Namespace = namespace
	p.sel = sel
	p.fields = fs
	p.set = s
	for _, f := range fs {
		switch {
		case !f.Equal || f.Index != nil:
		case f.Field == "metadata.name":
			p.Name = f.Value
		case p.Namespace != "" && p.Namespace != f.Value:
			p.None = true
			return p, "" // two namespaces: nothing is in both
		default:
			p.Namespace = f.Value
		}
	}
	ix, values, missing := s.ForLabels(sel)
	if missing != "" {
		return p, missing
	}
	for _, f := range fs {
		if f.Index == nil || !f.Equal {
			continue
		}
		vals := []string{f.Value}
		if ix == nil || f.Index.Count(vals) < ix.Count(values) {
			ix = f.Index
			values = vals
		}
	}
	p.Index = ix
	p.Values = values
	return p, ""
}
