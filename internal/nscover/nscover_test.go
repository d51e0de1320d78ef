package nscover

import "testing"

// A resource is held whole until Split; then only the namespaces its
// function takes in, and the other resources stay whole.
func TestSet_SplitResourceHoldsOnlyWhatItCovers(t *testing.T) {
	var s Set
	if !s.Covered("pods/v1", "a") {
		t.Errorf("Covered(pods/v1, a) = false before any Split, want true")
	}
	s.Split("pods/v1", func(ns string) bool { return ns == "a" })
	for _, c := range []struct {
		res, ns string
		want    bool
	}{
		{"pods/v1", "a", true},
		{"pods/v1", "b", false},
		{"configmaps/v1", "b", true},
	} {
		if got := s.Covered(c.res, c.ns); got != c.want {
			t.Errorf("Covered(%s, %s) = %v, want %v", c.res, c.ns, got, c.want)
		}
	}
}
