package kctltest_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/kctl-dev/kctl/kctltest"
)

// wireScenario is what a controller's informer and writes see on the wire
// (JSON): list pages and selectors, a selective watch from a list's
// resourceVersion (objects entering and leaving it), a watch from a
// resourceVersion long gone (410), the watch-list stream, finalizers, and
// apply conflicts, subresources, and cascades: owner references deleted in
// the foreground, the background and orphaned, and a namespace deleted (the
// real control plane runs kube-controller-manager for them).
func wireScenario(t *testing.T, env *kctltest.Env, ns string) []string {
	w := newWire(t, env, ns)
	var saw []string
	say := func(format string, args ...any) { saw = append(saw, fmt.Sprintf(format, args...)) }
	gadget := func(name, app string, size int, finalizer bool) string {
		fin := ""
		if finalizer {
			fin = `,"finalizers":["kctl.dev/test"]`
		}
		return fmt.Sprintf(`{"apiVersion":"kctltest.kctl.dev/v1","kind":"Gadget","metadata":{"name":%q,"labels":{"app":%q}%s},"spec":{"size":%d}}`, name, app, fin, size)
	}
	names := func(doc map[string]any) []string {
		items, _ := doc["items"].([]any)
		var out []string
		for _, it := range items {
			m, _ := it.(map[string]any)["metadata"].(map[string]any)
			out = append(out, fmt.Sprint(m["name"]))
		}
		return out
	}
	code, _ := w.do("POST", w.base, "application/json", gadget("a", "x", 1, true))
	say("create a: %d", code)
	code, _ = w.do("POST", w.base, "application/json", gadget("b", "y", 2, false))
	say("create b: %d", code)
	code, doc := w.do("GET", w.base+"?labelSelector=app%3Dx", "", "")
	say("list app=x: %d %v", code, names(doc))
	code, doc = w.do("GET", w.base+"?fieldSelector=metadata.name%3Db", "", "")
	say("list metadata.name=b: %d %v", code, names(doc))
	code, doc = w.do("GET", w.base+"?fieldSelector=spec.size%3D1", "", "")
	say("list spec.size=1: %d %v", code, doc["reason"])
	code, doc = w.do("GET", w.base+"?limit=1", "", "")
	meta, _ := doc["metadata"].(map[string]any)
	cont, _ := meta["continue"].(string)
	rv, _ := meta["resourceVersion"].(string)
	say("list limit=1: %d %v, continue given %t, remaining %v", code, names(doc), cont != "", meta["remainingItemCount"])
	code, doc = w.do("GET", w.base+"?limit=1&continue="+url.QueryEscape(cont), "", "")
	meta, _ = doc["metadata"].(map[string]any)
	say("its next page: %d %v, continue given %t", code, names(doc), meta["continue"] != nil && meta["continue"] != "")

	next := w.watch("allowWatchBookmarks=true&labelSelector=app%3Dx&resourceVersion=" + rv)
	w.do("PATCH", w.base+"/a", "application/merge-patch+json", `{"spec":{"size":3}}`)
	w.do("PATCH", w.base+"/b", "application/merge-patch+json", `{"spec":{"size":3}}`) // not app=x: unseen
	w.do("PATCH", w.base+"/a", "application/merge-patch+json", `{"metadata":{"labels":{"app":"z"}}}`)
	w.do("PATCH", w.base+"/b", "application/merge-patch+json", `{"metadata":{"labels":{"app":"x"}}}`)
	w.do("PATCH", w.base+"/a", "application/merge-patch+json", `{"metadata":{"labels":{"app":"x"}}}`)
	code, _ = w.do("DELETE", w.base+"/a", "", "")
	say("delete a, which has a finalizer: %d", code)
	code, _ = w.do("PATCH", w.base+"/a", "application/merge-patch+json", `{"metadata":{"finalizers":null}}`)
	say("remove its finalizer: %d", code)
	for _, l := range next(6) {
		say("watch app=x from the list: %s", l)
	}
	for _, l := range w.watch("resourceVersion=1")(1) {
		say("watch from resourceVersion 1: %s", l)
	}
	for _, l := range w.watch("allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan")(2) {
		say("watch-list: %s", l)
	}
	code, doc = w.do("GET", w.base+"?watch=true&sendInitialEvents=true", "", "")
	say("watch-list without resourceVersionMatch: %d %v", code, doc["reason"])

	apply := func(manager string, size int, force bool) (int, string) {
		q := "?fieldManager=" + manager
		if force {
			q += "&force=true"
		}
		code, doc := w.do("PATCH", w.base+"/c"+q, "application/apply-patch+yaml",
			fmt.Sprintf(`{"apiVersion":"kctltest.kctl.dev/v1","kind":"Gadget","metadata":{"name":"c"},"spec":{"size":%d}}`, size))
		msg, _ := doc["message"].(string)
		return code, msg
	}
	code, _ = apply("m1", 1, false)
	say("apply c size 1 as m1: %d", code)
	code, msg := apply("m2", 2, false)
	say("apply c size 2 as m2: %d, names m1 and .spec.size: %t", code, strings.Contains(msg, `conflict with "m1"`) && strings.Contains(msg, ".spec.size"))
	code, _ = apply("m2", 2, true)
	say("apply c size 2 as m2, forced: %d", code)
	code, doc = w.do("GET", w.base+"/c", "", "")
	spec, _ := doc["spec"].(map[string]any)
	say("c: %d size %v", code, spec["size"])
	applyStatus := func(name, manager string, seen int, force bool) (int, string) {
		q := "?fieldManager=" + manager
		if force {
			q += "&force=true"
		}
		code, doc := w.do("PATCH", w.base+"/"+name+"/status"+q, "application/apply-patch+yaml",
			fmt.Sprintf(`{"apiVersion":"kctltest.kctl.dev/v1","kind":"Gadget","metadata":{"name":%q},"spec":{"size":9},"status":{"seen":%d}}`, name, seen))
		msg, _ := doc["message"].(string)
		return code, msg
	}
	code, _ = applyStatus("c", "s1", 1, false)
	say("apply c's status seen 1 (and size 9) as s1: %d", code)
	code, msg = applyStatus("c", "s2", 2, false)
	say("apply c's status seen 2 as s2: %d, names s1 on the status and .status.seen: %t",
		code, strings.Contains(msg, `conflict with "s1" with subresource "status": .status.seen`))
	code, _ = applyStatus("c", "s2", 2, true)
	say("apply c's status seen 2 as s2, forced: %d", code)
	code, _ = apply("m1", 3, false)
	say("apply c size 3 as m1, who no longer owns it: %d", code)
	code, doc = w.do("GET", w.base+"/c", "", "")
	spec, _ = doc["spec"].(map[string]any)
	status, _ := doc["status"].(map[string]any)
	say("c: %d size %v seen %v", code, spec["size"], status["seen"])
	code, _ = applyStatus("nothing", "s1", 1, false)
	say("apply the status of a gadget that does not exist: %d", code)

	for i := range 3 {
		w.do("POST", w.base, "application/json", gadget(fmt.Sprintf("p%d", i+1), "paged", 1, false))
	}
	page := func(cont string) (string, string, string) {
		code, doc := w.do("GET", w.base+"?labelSelector=app%3Dpaged&limit=1&continue="+url.QueryEscape(cont), "", "")
		meta, _ := doc["metadata"].(map[string]any)
		items, _ := doc["items"].([]any)
		var sizes []any
		for _, it := range items {
			spec, _ := it.(map[string]any)["spec"].(map[string]any)
			sizes = append(sizes, spec["size"])
		}
		cont, _ = meta["continue"].(string)
		rv, _ := meta["resourceVersion"].(string)
		return fmt.Sprintf("%d %v sizes %v, remaining %v, continue given %t", code, names(doc), sizes, meta["remainingItemCount"], cont != ""), cont, rv
	}
	line, cont, rv := page("")
	say("list app=paged limit=1: %s", line)
	w.do("PATCH", w.base+"/p2", "application/merge-patch+json", `{"spec":{"size":9}}`)
	w.do("DELETE", w.base+"/p3", "", "")
	w.do("POST", w.base, "application/json", gadget("p4", "paged", 1, false))
	line, cont, rv2 := page(cont)
	say("after p2 resized, p3 deleted and p4 made, its next page: %s, at the first page's resourceVersion %t", line, rv2 == rv)
	line, _, _ = page(cont)
	say("and the next: %s", line)

	deploy := "/apis/apps/v1/namespaces/" + ns + "/deployments"
	code, _ = w.do("POST", deploy, "application/json", `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"replicas":2,`+
		`"selector":{"matchLabels":{"app":"d"}},"template":{"metadata":{"labels":{"app":"d"}},"spec":{"containers":[{"name":"c","image":"registry.example/c:1"}]}}}}`)
	say("create deployment d: %d", code)
	code, doc = w.do("GET", deploy+"/d/scale", "", "")
	say("its scale: %d %s", code, scaleLine(doc))
	meta, _ = doc["metadata"].(map[string]any)
	scale := func(replicas int) string {
		return fmt.Sprintf(`{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"d","resourceVersion":%q},"spec":{"replicas":%d}}`, meta["resourceVersion"], replicas)
	}
	code, doc = w.do("PUT", deploy+"/d/scale", "application/json", scale(3))
	say("update its scale to 3: %d %s", code, scaleLine(doc))
	code, doc = w.do("PUT", deploy+"/d/scale", "application/json", scale(4))
	say("again, from the resourceVersion before: %d %v", code, doc["reason"])
	code, doc = w.do("PATCH", deploy+"/d/scale", "application/merge-patch+json", `{"spec":{"replicas":5}}`)
	say("merge-patch its scale to 5: %d %s", code, scaleLine(doc))
	code, doc = w.do("GET", deploy+"/d", "", "")
	spec, _ = doc["spec"].(map[string]any)
	meta, _ = doc["metadata"].(map[string]any)
	say("d: %d replicas %v generation %v", code, spec["replicas"], meta["generation"])

	pods := "/api/v1/namespaces/" + ns + "/pods"
	code, _ = w.do("POST", pods, "application/json", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"registry.example/c:1"}]}}`)
	say("create pod p: %d", code)
	code, doc = w.do("POST", pods+"/p/eviction", "application/json", `{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"p"}}`)
	say("evict p: %d %v %v", code, doc["kind"], doc["status"])
	code, _ = w.do("GET", pods+"/p", "", "")
	say("p after its eviction: %d", code)

	// ConfigMaps, not gadgets: kube-controller-manager's garbage collector
	// sees a CRD made after it started only at its next discovery, up to 30 s on.
	cms := "/api/v1/namespaces/" + ns + "/configmaps"
	create := func(name string, owner map[string]any, finalizer bool) map[string]any {
		meta := map[string]any{"name": name}
		if owner != nil {
			m, _ := owner["metadata"].(map[string]any)
			meta["ownerReferences"] = []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
				"name": m["name"], "uid": m["uid"], "blockOwnerDeletion": true}}
		}
		if finalizer {
			meta["finalizers"] = []string{"kctl.dev/test"}
		}
		body, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta})
		code, doc := w.do("POST", cms, "application/json", string(body))
		say("create configmap %s: %d %s", name, code, metaLine(doc))
		return doc
	}
	o1 := create("o1", nil, false)
	create("k1", o1, true)
	code, doc = w.do("DELETE", cms+"/o1", "application/json", `{"propagationPolicy":"Foreground"}`)
	say("delete o1 in the foreground: %d %s", code, metaLine(doc))
	say("k1, which has a finalizer, is being deleted within 60 s: %t", w.until(cms+"/k1", deleting))
	code, doc = w.do("GET", cms+"/o1", "", "")
	say("o1 while k1 is there: %d %s", code, metaLine(doc))
	code, _ = w.do("PATCH", cms+"/k1", "application/merge-patch+json", `{"metadata":{"finalizers":null}}`)
	say("remove k1's finalizer: %d", code)
	say("o1 gone within 60 s: %t", w.until(cms+"/o1", gone))
	o2 := create("o2", nil, false)
	create("k2", o2, false)
	code, doc = w.do("DELETE", cms+"/o2", "application/json", `{"propagationPolicy":"Background"}`)
	say("delete o2 in the background: %d", code)
	say("k2 gone within 60 s: %t", w.until(cms+"/k2", gone))
	o3 := create("o3", nil, false)
	create("k3", o3, false)
	code, doc = w.do("DELETE", cms+"/o3", "application/json", `{"propagationPolicy":"Orphan"}`)
	say("delete o3, orphaning: %d %s", code, metaLine(doc))
	say("o3 gone within 60 s: %t", w.until(cms+"/o3", gone))
	code, doc = w.do("GET", cms+"/k3", "", "")
	say("k3: %d %s", code, metaLine(doc))

	code, doc = w.do("DELETE", "/api/v1/namespaces/"+ns, "", "")
	status, _ = doc["status"].(map[string]any)
	say("delete the namespace: %d phase %v", code, status["phase"])
	say("the namespace gone within 60 s: %t", w.until("/api/v1/namespaces/"+ns, gone))
	code, doc = w.do("GET", w.base, "", "")
	say("its gadgets: %d %v", code, names(doc))
	code, doc = w.do("GET", cms, "", "")
	say("its configmaps: %d %v", code, names(doc))
	return saw
}

var wantWireScenario = []string{
	"create a: 201",
	"create b: 201",
	"list app=x: 200 [a]",
	"list metadata.name=b: 200 [b]",
	"list spec.size=1: 400 BadRequest",
	"list limit=1: 200 [a], continue given true, remaining 1",
	"its next page: 200 [b], continue given false",
	"delete a, which has a finalizer: 200",
	"remove its finalizer: 200",
	"watch app=x from the list: MODIFIED a app=x size=3 deleting=false",
	"watch app=x from the list: DELETED a app=x size=3 deleting=false",
	"watch app=x from the list: ADDED b app=x size=3 deleting=false",
	"watch app=x from the list: ADDED a app=x size=3 deleting=false",
	"watch app=x from the list: MODIFIED a app=x size=3 deleting=true",
	"watch app=x from the list: DELETED a app=x size=3 deleting=true",
	"watch from resourceVersion 1: ERROR 410 Expired",
	"watch-list: ADDED b app=x size=3 deleting=false",
	"watch-list: BOOKMARK initial-events-end",
	"watch-list without resourceVersionMatch: 422 Invalid",
	"apply c size 1 as m1: 201",
	"apply c size 2 as m2: 409, names m1 and .spec.size: true",
	"apply c size 2 as m2, forced: 200",
	"c: 200 size 2",
	"apply c's status seen 1 (and size 9) as s1: 200",
	"apply c's status seen 2 as s2: 409, names s1 on the status and .status.seen: true",
	"apply c's status seen 2 as s2, forced: 200",
	"apply c size 3 as m1, who no longer owns it: 409",
	"c: 200 size 2 seen 2",
	"apply the status of a gadget that does not exist: 404",
	"list app=paged limit=1: 200 [p1] sizes [1], remaining <nil>, continue given true",
	"after p2 resized, p3 deleted and p4 made, its next page: 200 [p2] sizes [1], remaining <nil>, continue given true, at the first page's resourceVersion true",
	"and the next: 200 [p3] sizes [1], remaining <nil>, continue given false",
	"create deployment d: 201",
	"its scale: 200 autoscaling/v1 Scale replicas 2, status replicas 0 selector app=d",
	"update its scale to 3: 200 autoscaling/v1 Scale replicas 3, status replicas 0 selector app=d",
	"again, from the resourceVersion before: 409 Conflict",
	"merge-patch its scale to 5: 200 autoscaling/v1 Scale replicas 5, status replicas 0 selector app=d",
	"d: 200 replicas 5 generation 3",
	"create pod p: 201",
	"evict p: 201 Status Success",
	"p after its eviction: 404",
	"create configmap o1: 201 deleting=false finalizers <nil> owners 0",
	"create configmap k1: 201 deleting=false finalizers [kctl.dev/test] owners 1",
	"delete o1 in the foreground: 200 deleting=true finalizers [foregroundDeletion] owners 0",
	"k1, which has a finalizer, is being deleted within 60 s: true",
	"o1 while k1 is there: 200 deleting=true finalizers [foregroundDeletion] owners 0",
	"remove k1's finalizer: 200",
	"o1 gone within 60 s: true",
	"create configmap o2: 201 deleting=false finalizers <nil> owners 0",
	"create configmap k2: 201 deleting=false finalizers <nil> owners 1",
	"delete o2 in the background: 200",
	"k2 gone within 60 s: true",
	"create configmap o3: 201 deleting=false finalizers <nil> owners 0",
	"create configmap k3: 201 deleting=false finalizers <nil> owners 1",
	"delete o3, orphaning: 200 deleting=true finalizers [orphan] owners 0",
	"o3 gone within 60 s: true",
	"k3: 200 deleting=false finalizers <nil> owners 0",
	"delete the namespace: 200 phase Terminating",
	"the namespace gone within 60 s: true",
	"its gadgets: 200 []",
	"its configmaps: 200 []",
}

func TestInMemory_WireScenario_IsWhatTheAPIServerDoes(t *testing.T) {
	env := kctltest.StartInMemory(t)
	env.Apply(t, "testdata/gadget-crd.yaml")
	got := wireScenario(t, env, env.Namespace(t))
	if !slices.Equal(got, wantWireScenario) {
		t.Errorf("in-memory wire scenario:\n%s", diffLines(got, wantWireScenario))
	}
}

// The in-memory server's answers are the API server's: the same scenario
// against a real kube-apiserver, with kube-controller-manager's garbage
// collector and namespace controller, sees the same.
func TestWireScenario_IsWhatTheAPIServerDoes(t *testing.T) {
	env := kctltest.StartWithControllerManager(t)
	env.Apply(t, "testdata/gadget-crd.yaml")
	got := wireScenario(t, env, env.Namespace(t))
	if !slices.Equal(got, wantWireScenario) {
		t.Errorf("API server wire scenario:\n%s", diffLines(got, wantWireScenario))
	}
}
