package kctl

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

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
