package shardhash

// A shard member's selector of the namespaces in the ranges it holds.

// NothingSelected is the shard selector of a member that holds no
// namespace: the hash point of the namespace "", which namespaced
// objects never have (the server rejects an empty selector, and no
// selector would select everything). It is a function, not a package
// variable, so that a program that never shards does not link the
// selector's code through the package's initialisation.
func NothingSelected() string {
	none := Point(Sum(""))
	return Selector(FieldNamespace, none)
}

// HeldSelector is the selector naming the exact hash points of the
// namespaces (of names) in the held ranges, of len(held) ranges
// (NothingSelected if none), and those namespaces.
func HeldSelector(names []string, held []bool) (string, map[string]bool) {
	var points []Range
	selected := map[string]bool{}
	for _, name := range names {
		r := Bucket(name, len(held))
		if held[r] {
			points = append(points, Point(Sum(name)))
			selected[name] = true
		}
	}
	if len(points) == 0 {
		return NothingSelected(), selected
	}
	return Selector(FieldNamespace, points...), selected
}

// Count is the number of true values in bs (the ranges held, served).
func Count(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}
