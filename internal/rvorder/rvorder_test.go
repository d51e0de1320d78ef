package rvorder

import "testing"

func TestAtLeast_OrdersNumbersAndMatchesOthersOnlyWhenEqual(t *testing.T) {
	for _, c := range []struct {
		have, rv string
		want     bool
	}{
		{"11", "11", true},
		{"12", "11", true},
		{"100", "50", true},
		{"9", "11", false},
		{"x1", "x1", true},
		{"x2", "x1", false},
		{"", "1", false},
	} {
		if got := AtLeast(c.have, c.rv); got != c.want {
			t.Errorf("AtLeast(%q, %q) = %v, want %v", c.have, c.rv, got, c.want)
		}
	}
}

func TestCheck_RefusesWhatCannotBeOrdered(t *testing.T) {
	if err := Check("11"); err != nil {
		t.Errorf("Check(11) = %v, want nil", err)
	}
	if err := Check("x1"); err == nil {
		t.Errorf("Check(x1) = nil, want an error")
	}
}
