package objcopy

import (
	"strings"
	"testing"
)

type plain struct {
	Tags []string `json:"tags"`
}

type withFunc struct {
	Hook func() `json:"hook,omitempty"`
}

type failing struct{}

func (failing) MarshalJSON() ([]byte, error) { return nil, errFail }

var errFail = &failError{}

type failError struct{}

func (*failError) Error() string { return "no" }

// newOf is new(T), as Deep and Copyable take it.
func newOf[T any]() *T { return new(T) }

func TestDeep_ThroughJSON_SharesNoMemory(t *testing.T) {
	p := &plain{Tags: []string{"x"}}
	c := Deep(p, newOf[plain])
	c.Tags[0] = "y"
	if p.Tags[0] != "x" {
		t.Error("Deep(p) shares the tags with p")
	}
	if Deep(nil, newOf[plain]) != nil {
		t.Error("Deep(nil) != nil")
	}
}

func TestDeep_FailingRoundTrip_PanicsNamingTheType(t *testing.T) {
	defer func() {
		msg, _ := recover().(string)
		if !strings.Contains(msg, "deep copy of objcopy.failing through JSON") {
			t.Errorf("Deep(&failing{}) panicked with %q", msg)
		}
	}()
	Deep(&failing{}, newOf[failing])
}

func TestCopyable_FuncField_SaysWhatToDo(t *testing.T) {
	if err := Copyable(newOf[plain]); err != nil {
		t.Errorf("Copyable[plain]() = %v, want nil", err)
	}
	err := Copyable(newOf[withFunc])
	want := "kctl: objcopy.withFunc cannot be copied through JSON"
	if err == nil || !strings.HasPrefix(err.Error(), want) ||
		!strings.Contains(err.Error(), "give *withFunc a DeepCopyInto method") {
		t.Errorf("Copyable[withFunc]() = %v", err)
	}
}
