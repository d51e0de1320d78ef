package kctltest_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/kctl-dev/kctl/kctltest"
)

// A list's later pages read a snapshot as of its first page, which a
// compaction past it forgets, as etcd's does: the continue token is then
// 410 Gone (Expired), and the list must start again.
func TestInMemory_ListContinue_ExpiresWithCompaction(t *testing.T) {
	env := kctltest.StartInMemory(t)
	ns := env.Namespace(t)
	w := newWire(t, env, ns)
	cms := "/api/v1/namespaces/" + ns + "/configmaps"
	for _, name := range []string{"a", "b"} {
		code, doc := w.do("POST", cms, "application/json", `{"metadata":{"name":"`+name+`"}}`)
		if code != http.StatusCreated {
			t.Fatalf("create %s: HTTP %d %v", name, code, doc)
		}
	}
	next := func() string {
		_, doc := w.do("GET", cms+"?limit=1", "", "")
		meta, _ := doc["metadata"].(map[string]any)
		cont, _ := meta["continue"].(string)
		return cont
	}
	cont := next()
	w.do("POST", cms, "application/json", `{"metadata":{"name":"c"}}`) // history beyond the first page's
	env.Compact(t)
	if code, doc := w.do("GET", cms+"?limit=1&continue="+cont, "", ""); code != http.StatusGone || doc["reason"] != "Expired" {
		t.Errorf("the next page after a compaction: HTTP %d %v, want 410 Expired", code, doc["reason"])
	}
	cont = next()
	if code, doc := w.do("GET", cms+"?limit=1&continue="+cont, "", ""); code != http.StatusOK {
		t.Errorf("the next page of a list begun after the compaction: HTTP %d %v, want 200", code, doc)
	}
}

// A list of every namespace pages in the order of its objects' keys: a
// namespace whose name another's begins with ("pg" and "pg-b") loses
// nothing at a page's end.
func TestInMemory_ListContinue_AcrossNamespaces(t *testing.T) {
	env := kctltest.StartInMemory(t)
	w := newWire(t, env, "default")
	for _, ns := range []string{"pg", "pg-b"} {
		w.do("POST", "/api/v1/namespaces", "application/json", `{"metadata":{"name":"`+ns+`"}}`)
		code, doc := w.do("POST", "/api/v1/namespaces/"+ns+"/configmaps", "application/json", `{"metadata":{"name":"cm"}}`)
		if code != http.StatusCreated {
			t.Fatalf("create %s/cm: HTTP %d %v", ns, code, doc)
		}
	}
	var got []string
	cont := ""
	for range 10 {
		_, doc := w.do("GET", "/api/v1/configmaps?limit=1&continue="+url.QueryEscape(cont), "", "")
		items, _ := doc["items"].([]any)
		for _, it := range items {
			m, _ := it.(map[string]any)["metadata"].(map[string]any)
			got = append(got, fmt.Sprintf("%v/%v", m["namespace"], m["name"]))
		}
		meta, _ := doc["metadata"].(map[string]any)
		cont, _ = meta["continue"].(string)
		if cont == "" {
			break
		}
	}
	if want := []string{"pg/cm", "pg-b/cm"}; !slices.Equal(got, want) {
		t.Errorf("configmaps of every namespace, a page of 1 at a time: %v, want %v", got, want)
	}
}
