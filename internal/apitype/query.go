package apitype

// The query parameters of a list or watch request: what it selects, which
// page it reads, and how a watch is asked for.

import (
	"net/url"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/labels"
)

// ListQuery is the query of a list or watch of the objects matching
// sel (nil or empty: every one), the field selector fields and the shard
// selector shard ("": none), e.g. kctl.ListOptions's.
func ListQuery(sel labels.Selector, fields, shard string) url.Values {
	q := url.Values{}
	if sel != nil && !sel.Empty() {
		q.Set("labelSelector", sel.String())
	}
	if fields != "" {
		q.Set("fieldSelector", fields)
	}
	if shard != "" {
		q.Set("shardSelector", shard)
	}
	return q
}

// SetPage sets in q, a list's query, the page size limit (0: none) and
// the continue token ("": the first page).
func SetPage(q url.Values, limit int64, continueToken string) {
	if limit > 0 {
		q.Set("limit", strconv.FormatInt(limit, 10))
	}
	if continueToken != "" {
		q.Set("continue", continueToken)
	}
}

// SetWatch makes q a watch's query, with bookmarks, which the server ends
// after timeout rounded down to seconds, at least 1 s: the timeout it
// returns.
func SetWatch(q url.Values, timeout time.Duration) time.Duration {
	seconds := max(1, int(timeout.Seconds()))
	q.Set("watch", "true")
	q.Set("allowWatchBookmarks", "true")
	q.Set("timeoutSeconds", strconv.Itoa(seconds))
	return time.Duration(seconds) * time.Second
}
