package kctltest

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// A suite setup's failure, returned or by Fatal, is what run returns; its
// cleanups run at close, last first.
func TestSuite_SetupFailure_IsReturnedAndCleanupsRunAtClose(t *testing.T) {
	Start(t) // skips or fails as every integration test does
	s := newSuite()
	var order []string
	err := s.run(func(tb TB, env *Env) error {
		tb.Cleanup(func() { order = append(order, "first") })
		tb.Cleanup(func() { order = append(order, "second") })
		return errors.New("no CRDs")
	})
	if err == nil || !strings.Contains(err.Error(), "no CRDs") {
		t.Errorf("run of a setup returning an error = %v, want it", err)
	}
	reached := false
	err = s.run(func(tb TB, env *Env) error {
		tb.Fatalf("cannot apply %s", "crds.yaml")
		reached = true
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "cannot apply crds.yaml") || reached {
		t.Errorf("run of a setup calling Fatalf = %v (went on: %t), want its message and a stop", err, reached)
	}
	if len(order) != 0 {
		t.Errorf("cleanups ran before close: %v", order)
	}
	s.close()
	if !slices.Equal(order, []string{"second", "first"}) {
		t.Errorf("cleanups ran in the order %v, want [second first]", order)
	}
	if s.Context().Err() == nil {
		t.Error("the suite's context did not end at close")
	}
}
