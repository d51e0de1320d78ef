package kctl

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

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

// A probe that fails tells nothing, so /readyz must not claim the
// server-side selector: it did when every probe failed (seen with the
// gate off, on a loaded machine, where probes timed out). The mode says
// "not probed yet" until a probe answers. The failure is injected by
// pointing the Manager's Conn at a loopback port nobody listens on.
func TestShardProbe_Failed_ModeSaysNotProbedYet(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	run, err := mgr.shard(ShardOptions{Group: "probe", Namespace: ns, Identity: "m-0"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := InformerFor[corev1.ConfigMap](mgr.Cache()); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := rest.CopyConfig(cfg)
	dead.Host = "https://" + l.Addr().String()
	l.Close()
	live := mgr.conn
	mgr.conn = testProbeConn(t, dead)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	run.probe(ctx)
	if note := run.note(); !strings.Contains(note, "not probed yet") || strings.Contains(note, "server-side selector") {
		t.Errorf("after a failed probe, the shard note is %q; want \"not probed yet\"", note)
	}
	mgr.conn = live
	run.probe(t.Context())
	if note := run.note(); !strings.Contains(note, "client-side filter: memory not split") {
		t.Errorf("after a probe of the default server, the shard note is %q; want the client-side filter", note)
	}
}
