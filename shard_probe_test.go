package kctl

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
)

func testProbeConn(t *testing.T, cfg *rest.Config) *Conn {
	t.Helper()
	conn, err := NewConn(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

func testResource[T any](t *testing.T) Resource {
	t.Helper()
	res, err := ResourceOf[T]()
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// With the gate on, the probe says the selector is served, for core,
// grouped and namespaced resources alike.
func TestProbeShardSelector_GateOn_Served(t *testing.T) {
	conn := testProbeConn(t, testShardedConfig(t))
	for _, res := range []Resource{
		testResource[corev1.ConfigMap](t),
		testResource[appsv1.ReplicaSet](t),
		testResource[coordinationv1.Lease](t),
		testResource[corev1.Namespace](t),
	} {
		served, err := probeShardSelector(t.Context(), conn, res)
		if err != nil || !served {
			t.Errorf("probeShardSelector(%s) = %v, %v; want true, nil", res, served, err)
		}
	}
}

// With the gate off, the server ignores the parameter: not served, no error.
func TestProbeShardSelector_GateOff_NotServed(t *testing.T) {
	conn := testProbeConn(t, testConfig(t))
	res := testResource[corev1.ConfigMap](t)
	served, err := probeShardSelector(t.Context(), conn, res)
	if err != nil || served {
		t.Fatalf("probeShardSelector(%s) = %v, %v; want false, nil", res, served, err)
	}
}

// A replica that may not list cannot tell: an error naming the permission.
func TestProbeShardSelector_Forbidden_ErrorNamesThePermission(t *testing.T) {
	conn := testProbeConn(t, testUnprivilegedConfig(t))
	res := testResource[corev1.ConfigMap](t)
	served, err := probeShardSelector(t.Context(), conn, res)
	if err == nil || served {
		t.Fatalf("probeShardSelector(%s) = %v, %v; want an error", res, served, err)
	}
	for _, want := range []string{"kctl: ", "403", "list on configmaps"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
