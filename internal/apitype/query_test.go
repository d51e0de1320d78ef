package apitype

import (
	"net/url"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
)

func TestListQuery_SetPage_SetWatch(t *testing.T) {
	if q := ListQuery(nil, "", ""); len(q) != 0 {
		t.Errorf("ListQuery of nothing = %v, want none", q)
	}
	if q := ListQuery(labels.Everything(), "", ""); len(q) != 0 {
		t.Errorf("ListQuery of an empty selector = %v, want none", q)
	}
	sel := labels.SelectorFromSet(labels.Set{"app": "web"})
	q := ListQuery(sel, "spec.nodeName=n1", "shardRange(x)")
	SetPage(q, 500, "tok")
	want := "continue=tok&fieldSelector=spec.nodeName%3Dn1&labelSelector=app%3Dweb&limit=500&shardSelector=shardRange%28x%29"
	if got := q.Encode(); got != want {
		t.Errorf("a page's query = %s, want %s", got, want)
	}
	q = url.Values{}
	SetPage(q, 0, "")
	if len(q) != 0 {
		t.Errorf("SetPage of no limit and the first page = %v, want none", q)
	}
	for _, c := range []struct {
		timeout time.Duration
		want    time.Duration
		seconds string
	}{
		{0, time.Second, "1"},
		{1500 * time.Millisecond, time.Second, "1"},
		{5 * time.Minute, 5 * time.Minute, "300"},
	} {
		q := url.Values{}
		got := SetWatch(q, c.timeout)
		want := "allowWatchBookmarks=true&timeoutSeconds=" + c.seconds + "&watch=true"
		if got != c.want || q.Encode() != want {
			t.Errorf("SetWatch(%v) = %v, %s; want %v, %s", c.timeout, got, q.Encode(), c.want, want)
		}
	}
}
