package errtext

import (
	"errors"
	"testing"
)

func TestLeftOut_NamesEachObjectWithOnePrefix(t *testing.T) {
	bad := errors.New("kctl: decoding pods/v1 shop/a: boom")
	other := errors.New("decoding pods/v1 shop/b: bang")
	err := LeftOut("pods/v1 in namespace shop", []error{bad, other})
	want := "kctl: list pods/v1 in namespace shop: left out 2 object(s) that could not be decoded: " +
		"decoding pods/v1 shop/a: boom\ndecoding pods/v1 shop/b: bang"
	if err == nil || err.Error() != want || !errors.Is(err, bad) || !errors.Is(err, other) {
		t.Errorf("LeftOut = %v, want %q wrapping both", err, want)
	}
}
