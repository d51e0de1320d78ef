package pager

import (
	"errors"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// pages serves "a" then "b" from token "" and "1", failing token "1"
// with a 410 Gone the first expire times.
func pages(expire int) (Page[string], *int) {
	calls := 0
	return func(token string) ([]string, string, []error, error) {
		calls++
		if token == "" {
			return []string{"a"}, "1", []error{errors.New("bad")}, nil
		}
		if expire > 0 {
			expire--
			return nil, "", nil, apierrors.NewResourceExpired("expired")
		}
		return []string{"b"}, "", nil, nil
	}, &calls
}

func TestAll_ExpiredTokenStartsOver_AtMostMaxRestartsTimes(t *testing.T) {
	page, calls := pages(2)
	items, skipped, err := All(page, 2)
	if err != nil || !slices.Equal(items, []string{"a", "b"}) || len(skipped) != 1 || *calls != 6 {
		t.Errorf("All(expiring twice, 2) = %v, %v, %v after %d calls; want [a b], one skipped, 6 calls", items, skipped, err, *calls)
	}
	page, _ = pages(3)
	items, skipped, err = All(page, 2)
	if !apierrors.IsResourceExpired(err) || items != nil || skipped != nil {
		t.Errorf("All(expiring thrice, 2) = %v, %v, %v; want the expiry alone", items, skipped, err)
	}
}
