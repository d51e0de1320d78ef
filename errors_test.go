package kctl

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// onePrefix fails the test unless every line of err's message starts with
// "kctl: " and has no other.
func onePrefix(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error", what)
		return
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		if !strings.HasPrefix(line, errPrefix) || strings.Count(line, errPrefix) != 1 {
			t.Errorf("%s: %q, want one %q prefix", what, line, errPrefix)
		}
	}
}

func TestErrors_WrappingAKctlError_KeepsOnePrefixAndTheChain(t *testing.T) {
	m, err := NewManager(Options{Config: &rest.Config{Host: "http://127.0.0.1:1"}}) // never contacted
	if err != nil {
		t.Fatal(err)
	}
	NewController(m, "undeclared", func(context.Context, *undeclared) (Result, error) { return Result{}, nil })
	onePrefix(t, "a controller of an undeclared type", m.Start(context.Background()))

	onePrefix(t, "TransformFor of an undeclared type", TransformFor(m.Cache(), func(*undeclared) {}))
	_, err = InformerFor[undeclared](m.Cache())
	onePrefix(t, "InformerFor of an undeclared type", err)

	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "x", errors.New("changed"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = RetryOnConflict(ctx, func() error { return fmt.Errorf("kctl: update configmaps/v1 ns/x: %w", conflict) })
	onePrefix(t, "RetryOnConflict ended by its context", err)
	if !errors.Is(err, context.Canceled) || !apierrors.IsConflict(err) {
		t.Errorf("RetryOnConflict = %v: want it to match both context.Canceled and the Conflict", err)
	}

	inner := fmt.Errorf("kctl: inner: %w", conflict)
	outer := fmt.Errorf("kctl: outer: %w", unprefixed(inner))
	onePrefix(t, "unprefixed", outer)
	if !apierrors.IsConflict(outer) || !errors.Is(outer, inner) {
		t.Errorf("%v: errors.Is does not see through unprefixed", outer)
	}
	if unprefixed(nil) != nil {
		t.Error("unprefixed(nil) != nil")
	}
}

func TestTerminal_NilIsNilAndTheZeroValueHasAMessage(t *testing.T) {
	if err := Terminal(nil); err != nil {
		t.Errorf("Terminal(nil) = %v, want nil", err)
	}
	if got := (terminalError{}).Error(); got != ErrTerminal.Error() {
		t.Errorf("terminalError{}.Error() = %q, want %q", got, ErrTerminal.Error())
	}
	cause := errors.New("bad selector")
	err := Terminal(cause)
	if !errors.Is(err, ErrTerminal) || !errors.Is(err, cause) || err.Error() != "terminal: bad selector" {
		t.Errorf("Terminal(%v) = %v: want it to match ErrTerminal and its cause", cause, err)
	}
}

// uncopyable cannot round-trip through JSON, so kctl cannot copy it.
type uncopyable struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Hook              func() `json:"hook,omitempty"`
}

var _ = Declare[uncopyable](Resource{Group: "kctl.test", Version: "v1", Kind: "Uncopyable", Namespaced: true})

func TestNewClient_TypeThatJSONCannotCopy_IsAClearErrorNotAPanic(t *testing.T) {
	conn, err := NewConn(&rest.Config{Host: "http://127.0.0.1:1"}) // never contacted
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewClient[uncopyable](conn).Get(t.Context(), "ns", "x")
	onePrefix(t, "Get of a type with a func field", err)
	if err == nil || !strings.Contains(err.Error(), "cannot be copied through JSON") || !strings.Contains(err.Error(), "DeepCopyInto") {
		t.Errorf("Get of a type with a func field = %v, want an error saying it cannot be copied and what to do", err)
	}
}
