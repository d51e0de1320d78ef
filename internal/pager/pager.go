// Package pager reads a paged list to its end: the pages' items joined
// in order, starting over from the first page when the continue token
// expires (the server's 410 Gone) in the middle, at most a given number
// of times (All); or, as kctl's informer lists, fetched ahead of their
// use page by page (Ahead, with internal/readahead).
package pager

import apierrors "k8s.io/apimachinery/pkg/api/errors"

// Page reads the page of continue token token ("" for the first): its
// items, the next page's token ("" after the last), and the errors of
// the items it left out (undecodable); err is for the whole page.
type Page[P any] func(token string) (
	items []P,
	next string,
	skipped []error,
	err error,
)

// All reads every page with page and returns their items and left-out
// items' errors. A page after the first whose token has expired starts
// the list over, at most maxRestarts times; any other error, or an
// expiry after those, is returned alone.
func All[P any](page Page[P], maxRestarts int) ([]P, []error, error) {
	var all []P
	var skipped []error
	token := ""
	restarts := 0
	for {
		items, next, bad, err := page(token)
		expired := err != nil && apierrors.IsResourceExpired(err)
		canRestart := token != "" && restarts < maxRestarts
		if expired && canRestart {
			all = nil
			skipped = nil
			token = ""
			restarts++
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		all = append(all, items...)
		skipped = append(skipped, bad...)
		token = next
		if token == "" {
			return all, skipped, nil
		}
	}
}
