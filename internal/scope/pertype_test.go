package scope

import (
	"errors"
	"testing"
)

// The zero PerType is empty and ready; each setting is kept per key.
func TestPerType_ZeroIsEmpty_SettingsKeptPerKey(t *testing.T) {
	var p PerType[string, int]
	if _, ok := p.Scope("pods"); ok {
		t.Error("the zero PerType has a scope")
	}
	if p.Transform("pods") != nil || p.Partial("pods") != nil {
		t.Error("the zero PerType has a transform or a partial error")
	}
	if _, ok := p.Resync("pods"); ok {
		t.Error("the zero PerType has a resync period")
	}
	refused := errors.New("metadata only")
	p.SetScope("pods", 3)
	p.SetTransform("pods", func(*int) {})
	p.SetResync("pods", 0)
	p.SetPartial("secrets", refused)
	if s, ok := p.Scope("pods"); !ok || s != 3 {
		t.Errorf("Scope(pods) = %d, %v; want 3, true", s, ok)
	}
	if _, ok := p.Transform("pods").(func(*int)); !ok {
		t.Errorf("Transform(pods) = %T, want the func(*int) set", p.Transform("pods"))
	}
	if d, ok := p.Resync("pods"); !ok || d != 0 {
		t.Errorf("Resync(pods) = %v, %v; want 0 (never), true", d, ok)
	}
	if p.Partial("secrets") != refused || p.Partial("pods") != nil {
		t.Error("Partial is not kept per key")
	}
	if _, ok := p.Resync("secrets"); ok {
		t.Error("secrets has a resync period it was never given")
	}
}
