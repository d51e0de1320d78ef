package kctl

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func testReplicaSet(ns, name string) *appsv1.ReplicaSet {
	labels := map[string]string{"app": name}
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.ReplicaSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/app:1"}}},
			},
		},
	}
}

func ownedPod(rs *appsv1.ReplicaSet, name string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: rs.Namespace, Name: name, Labels: rs.Spec.Template.Labels},
		Spec:       rs.Spec.Template.Spec,
	}
	if err := SetControllerReference(rs, p); err != nil {
		panic(err)
	}
	return p
}

// podCount is the seed example: label each ReplicaSet with the number of its Pods.
func podCount(pods *Client[corev1.Pod], rsets *Client[appsv1.ReplicaSet]) func(ctx context.Context, rs *appsv1.ReplicaSet) (Result, error) {
	return func(ctx context.Context, rs *appsv1.ReplicaSet) (Result, error) {
		sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
		if err != nil {
			return Result{}, Terminal(err)
		}
		list, err := pods.List(ctx, ListOptions{Namespace: rs.Namespace, Labels: sel})
		if err != nil {
			return Result{}, err
		}
		n := strconv.Itoa(len(list))
		if rs.Labels["pod-count"] == n {
			return Result{}, nil
		}
		if rs.Labels == nil {
			rs.Labels = map[string]string{}
		}
		rs.Labels["pod-count"] = n
		return Result{}, rsets.Update(ctx, rs)
	}
}

func TestController_PodCount_LabelsFollowOwnedPods(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	pods, rsets := ClientFor[corev1.Pod](mgr), ClientFor[appsv1.ReplicaSet](mgr)
	c := NewController(mgr, "podcount", podCount(pods, rsets))
	Owns[corev1.Pod](c)
	startManager(t, mgr)

	ctx := t.Context()
	rs := testReplicaSet(ns, "web")
	if err := rsets.Create(ctx, rs); err != nil {
		t.Fatal(err)
	}
	wantLabel := func(want string) {
		t.Helper()
		eventually(t, "pod-count="+want, func() bool {
			got, err := rsets.Uncached().Get(ctx, ns, "web")
			return err == nil && got.Labels["pod-count"] == want
		})
	}
	wantLabel("0")
	for i := range 3 {
		if err := pods.Create(ctx, ownedPod(rs, fmt.Sprintf("web-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	wantLabel("3")
	if err := pods.Delete(ctx, ns, "web-1"); err != nil {
		t.Fatal(err)
	}
	wantLabel("2")
}

// reconcileLog records reconciles and their triggers, and counts how many
// run at once.
type reconcileLog struct {
	mu       sync.Mutex
	triggers map[string][]Trigger // by key
	running  atomic.Int32
	maxSeen  atomic.Int32
}

func (l *reconcileLog) record(ctx context.Context, k Key) func() {
	n := l.running.Add(1)
	for {
		m := l.maxSeen.Load()
		if n <= m || l.maxSeen.CompareAndSwap(m, n) {
			break
		}
	}
	tr, _ := TriggerFrom(ctx)
	l.mu.Lock()
	if l.triggers == nil {
		l.triggers = map[string][]Trigger{}
	}
	l.triggers[k.String()] = append(l.triggers[k.String()], tr)
	l.mu.Unlock()
	return func() { l.running.Add(-1) }
}

func (l *reconcileLog) causes(k string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, t := range l.triggers[k] {
		out = append(out, t.Cause)
	}
	return out
}

func (l *reconcileLog) saw(k, cause string) bool {
	for _, c := range l.causes(k) {
		if c == cause {
			return true
		}
	}
	return false
}

func TestController_Sources_RecordTheirTrigger(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{Cache: CacheOptions{Resync: 2 * time.Second}})
	cms := ClientFor[corev1.ConfigMap](mgr)
	var log reconcileLog
	c := NewController(mgr, "triggers", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		defer log.record(ctx, Key{cm.Namespace, cm.Name})()
		return Result{}, nil
	})
	c.OnDelete(func(ctx context.Context, cm *corev1.ConfigMap) { log.record(ctx, Key{cm.Namespace, cm.Name})() })
	// A Pod whose controller is a ConfigMap enqueues it; a Secret maps to the
	// ConfigMap of the same name; a channel value names a ConfigMap.
	Owns[corev1.Pod](c)
	Watches(c, func(s *corev1.Secret) []Key { return []Key{{s.Namespace, s.Name}} })
	ticks := make(chan string, 1)
	FromChannel(c, ticks, func(s string) bool { return s != "ignored" }, func(s string) []Key { return []Key{{ns, s}} })
	ctx := t.Context()
	// A key enqueued before the controller runs is kept, not dropped.
	early := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "early"}}
	if err := cms.Uncached().Create(ctx, early); err != nil {
		t.Fatal(err)
	}
	c.Enqueue(Key{ns, "early"})
	startManager(t, mgr)

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a"}, Data: map[string]string{"k": "1"}}
	if err := cms.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	// Created before or after the controller's first run: either cause is right.
	eventually(t, "created", func() bool { return log.saw(ns+"/a", "created") || log.saw(ns+"/a", "initial") })
	cm.Labels = map[string]string{"x": "y"}
	if err := cms.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	eventually(t, "updated", func() bool { return log.saw(ns+"/a", "updated") })
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a"}}
	if err := NewClient[corev1.Secret](mgr.conn).Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	eventually(t, "mapped", func() bool { return log.saw(ns+"/a", "mapped") })
	ticks <- "ignored"
	ticks <- "a"
	eventually(t, "channel", func() bool { return log.saw(ns+"/a", "channel") })
	c.Enqueue(Key{ns, "a"})
	eventually(t, "manual", func() bool { return log.saw(ns+"/a", "manual") })
	eventually(t, "early manual", func() bool { return log.saw(ns+"/early", "manual") })
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "child"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/app:1"}}}}
	if err := SetControllerReference(cm, pod); err != nil {
		t.Fatal(err)
	}
	if err := NewClient[corev1.Pod](mgr.conn).Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	eventually(t, "owned", func() bool { return log.saw(ns+"/a", "owned") })
	eventually(t, "resync", func() bool { return log.saw(ns+"/a", "resync") })
	if err := cms.Delete(ctx, ns, "early"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "deleted (OnDelete)", func() bool { return log.saw(ns+"/early", "deleted") })

	log.mu.Lock()
	defer log.mu.Unlock()
	for _, tr := range log.triggers[ns+"/a"] {
		if tr.Cause == "owned" && !strings.HasPrefix(tr.Detail, "Pod "+ns+"/child") {
			t.Errorf("owned trigger detail = %q, want the Pod", tr.Detail)
		}
		if tr.Cause == "updated" && tr.Detail != "labels" {
			t.Errorf("updated trigger detail = %q, want %q", tr.Detail, "labels")
		}
		if tr.Attempt != 1 {
			t.Errorf("trigger %+v: Attempt = %d, want 1", tr, tr.Attempt)
		}
	}
}

func TestController_Predicates_DropFilteredEvents(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	cms := ClientFor[corev1.ConfigMap](mgr)
	var log reconcileLog
	onlyLabelled := func(e ObjectEvent) bool { return e.Object.GetLabels()["watch"] == "yes" }
	c := NewController(mgr, "predicates", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		defer log.record(ctx, Key{cm.Namespace, cm.Name})()
		return Result{}, nil
	})
	c.WithEventFilter(onlyLabelled).WithPredicates(LabelsChanged)
	startManager(t, mgr)

	ctx := t.Context()
	for _, name := range []string{"ignored", "watched"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if name == "watched" {
			cm.Labels = map[string]string{"watch": "yes"}
		}
		if err := cms.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "watched reconciled", func() bool { return len(log.causes(ns+"/watched")) == 1 })
	// A data-only change fails LabelsChanged; a label change passes.
	cm, _ := cms.Uncached().Get(ctx, ns, "watched")
	cm.Data = map[string]string{"k": "v"}
	if err := cms.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	cm.Labels["more"] = "x"
	if err := cms.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	eventually(t, "label update reconciled", func() bool { return log.saw(ns+"/watched", "updated") })
	if got := log.causes(ns + "/watched"); len(got) != 2 {
		t.Errorf("reconciles of watched = %v, want [created updated]: the data-only update passed LabelsChanged", got)
	}
	if got := log.causes(ns + "/ignored"); len(got) != 0 {
		t.Errorf("reconciles of ignored = %v, want none", got)
	}
}

func TestOwnerKeys_MatchGroupAndKindWhateverTheVersion(t *testing.T) {
	widgets := Resource{Group: "example.com", Version: "v1", Kind: "Widget", Plural: "widgets", Namespaced: true}
	nodes := Resource{Version: "v1", Kind: "Node", Plural: "nodes"}
	for _, tc := range []struct {
		res        Resource
		apiVersion string
		kind       string
		controller bool
		want       []Key
	}{
		{widgets, "example.com/v1", "Widget", true, []Key{{"ns", "owner"}}},
		{widgets, "example.com/v1beta1", "Widget", true, []Key{{"ns", "owner"}}}, // the controller moved to v1
		{widgets, "example.com/v2", "Widget", true, []Key{{"ns", "owner"}}},
		{widgets, "other.com/v1", "Widget", true, nil},    // another group
		{widgets, "example.com/v1", "Gadget", true, nil},  // another kind
		{widgets, "example.com/v1", "Widget", false, nil}, // not the controller
		{widgets, "example.com/v1/extra", "Widget", true, nil},
		{nodes, "v1", "Node", true, []Key{{"", "owner"}}}, // a cluster-scoped owner has no namespace
		{nodes, "example.com/v1", "Node", true, nil},
	} {
		child := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "child",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: tc.apiVersion, Kind: tc.kind, Name: "owner", UID: "u", Controller: &tc.controller}}}}
		got := ownerKeys(tc.res, child)
		if len(got) != len(tc.want) || len(got) == 1 && got[0] != tc.want[0] {
			t.Errorf("ownerKeys(%s, owner %s %s controller=%v) = %v, want %v", tc.res, tc.apiVersion, tc.kind, tc.controller, got, tc.want)
		}
	}
}

// An owner reference written at an older version of the owner's group still
// enqueues the owner; one of another group with the same kind does not.
func TestController_Owns_OwnerReferenceAtAnotherVersionEnqueuesTheOwner(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	var log reconcileLog
	c := NewController(mgr, "owns-versions", func(ctx context.Context, rs *appsv1.ReplicaSet) (Result, error) {
		defer log.record(ctx, Key{rs.Namespace, rs.Name})()
		return Result{}, nil
	})
	Owns[corev1.ConfigMap](c)
	startManager(t, mgr)
	ctx := t.Context()
	rs := testReplicaSet(ns, "rs")
	if err := NewClient[appsv1.ReplicaSet](mgr.conn).Create(ctx, rs); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the ReplicaSet reconciled once", func() bool { return len(log.causes(ns+"/rs")) > 0 })
	cms := NewClient[corev1.ConfigMap](mgr.conn)
	child := func(name, apiVersion string) *corev1.ConfigMap {
		yes := true
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: []metav1.OwnerReference{
			{APIVersion: apiVersion, Kind: "ReplicaSet", Name: "rs", UID: types.UID(rs.UID), Controller: &yes}}}}
	}
	// The decoy comes first: handled in order, it would be queued before the child.
	if err := cms.Create(ctx, child("decoy", "example.com/v1")); err != nil {
		t.Fatal(err)
	}
	if err := cms.Create(ctx, child("child", "apps/v1beta2")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "an owned reconcile of the ReplicaSet", func() bool { return log.saw(ns+"/rs", "owned") })
	log.mu.Lock()
	defer log.mu.Unlock()
	for _, tr := range log.triggers[ns+"/rs"] {
		if tr.Cause == "owned" && !strings.HasPrefix(tr.Detail, "ConfigMap "+ns+"/child") {
			t.Errorf("owned trigger %+v: want only the child whose owner reference is apps/v1beta2, not the decoy of group example.com", tr)
		}
	}
}
