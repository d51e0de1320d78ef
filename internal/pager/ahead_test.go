package pager

import (
	"context"
	"errors"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Ahead hands on every page's items and left-out errors in order, asks
// for the next page by the ListMeta handed early or returned, and
// returns the last page's resourceVersion.
func TestAhead_UsesEveryPageInOrderAndReturnsTheLastResourceVersion(t *testing.T) {
	fetch := func(
		ctx context.Context,
		token string,
		early func(metav1.ListMeta),
	) ([]string, metav1.ListMeta, []error, error) {
		switch token {
		case "":
			m := metav1.ListMeta{ResourceVersion: "5", Continue: "1"}
			early(m) // told early: the next page is asked for at once
			return []string{"a", "b"}, m, nil, nil
		case "1":
			m := metav1.ListMeta{ResourceVersion: "5", Continue: "2"}
			return []string{"c"}, m, []error{errors.New("bad")}, nil
		}
		return []string{"d"}, metav1.ListMeta{ResourceVersion: "6"}, nil, nil
	}
	var items []string
	var skipped []error
	use := func(page []string, bad []error) {
		items = append(items, page...)
		skipped = append(skipped, bad...)
	}
	rv, err := Ahead(context.Background(), 2, fetch, use)
	if err != nil || rv != "6" {
		t.Fatalf("Ahead = %q, %v; want 6, nil", rv, err)
	}
	if !slices.Equal(items, []string{"a", "b", "c", "d"}) || len(skipped) != 1 {
		t.Errorf("used %v with %d skipped, want a b c d with 1", items, len(skipped))
	}
}

// A failed page's error is returned, with no resourceVersion.
func TestAhead_ReturnsAFetchsError(t *testing.T) {
	boom := errors.New("boom")
	fetch := func(
		ctx context.Context,
		token string,
		early func(metav1.ListMeta),
	) ([]string, metav1.ListMeta, []error, error) {
		if token == "" {
			return []string{"a"}, metav1.ListMeta{ResourceVersion: "5", Continue: "1"}, nil, nil
		}
		return nil, metav1.ListMeta{}, nil, boom
	}
	rv, err := Ahead(context.Background(), 2, fetch, func([]string, []error) {})
	if !errors.Is(err, boom) || rv != "" {
		t.Errorf("Ahead = %q, %v; want \"\", boom", rv, err)
	}
}
