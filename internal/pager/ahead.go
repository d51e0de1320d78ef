package pager

// A list's pages fetched ahead of their use (internal/readahead), as
// kctl's informer lists.

import (
	"context"

	"github.com/kctl-dev/kctl/internal/readahead"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Fetch fetches the page of continue token token ("" for the first): its
// items, its ListMeta (the next page's token, the list's
// resourceVersion) and the errors of the items it left out; err is for
// the whole page. It may hand early the ListMeta as soon as it is read,
// before the items are decoded (see Early): the next page is then asked
// for at once.
type Fetch[P any] func(
	ctx context.Context,
	token string,
	early func(metav1.ListMeta),
) (items []P, meta metav1.ListMeta, skipped []error, err error)

// Ahead fetches every page of a list with fetch, at most ahead pages
// ahead of the one in use, and hands each page's items and left-out
// items' errors to use, in order, on the caller's goroutine. It returns
// the resourceVersion of the last page, or the first error of a fetch
// (after every fetch it started has ended: readahead.Pages).
func Ahead[P any](
	ctx context.Context,
	ahead int,
	fetch Fetch[P],
	use func(items []P, skipped []error),
) (resourceVersion string, err error) {
	type page struct {
		items   []P
		meta    metav1.ListMeta
		skipped []error
	}
	pageOf := func(
		ctx context.Context,
		token string,
		early func(next string),
	) (page, string, error) {
		var p page
		var err error
		onMeta := func(m metav1.ListMeta) { early(m.Continue) }
		p.items, p.meta, p.skipped, err = fetch(ctx, token, onMeta)
		return p, p.meta.Continue, err
	}
	rv := ""
	usePage := func(p page) {
		use(p.items, p.skipped)
		rv = p.meta.ResourceVersion
	}
	err = readahead.Pages(ctx, ahead, pageOf, usePage)
	if err != nil {
		return "", err
	}
	return rv, nil
}
