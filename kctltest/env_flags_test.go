package kctltest_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/kctl-dev/kctl/kctltest"
)

// StartWithFlags gives a control plane of its own whose kube-apiserver has
// the flags: here the ShardedListAndWatch gate, which echoes a shard
// selector; the same flags give the same Env, none give Start's.
func TestStartWithFlags_ServesTheFeatureGate(t *testing.T) {
	const gate = "--feature-gates=ShardedListAndWatch=true"
	env := kctltest.StartWithFlags(t, gate)
	if env == kctltest.Start(t) {
		t.Fatal("StartWithFlags with a flag returned Start's Env")
	}
	if kctltest.StartWithFlags(t, gate) != env {
		t.Fatal("StartWithFlags with the same flags returned another Env")
	}
	if kctltest.StartWithFlags(t) != kctltest.Start(t) {
		t.Fatal("StartWithFlags without flags is not Start")
	}
	q := url.Values{"limit": {"1"}, "shardSelector": {
		"shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')"}}
	out := env.Kubectl(t, "get", "--raw", "/api/v1/namespaces?"+q.Encode())
	if !strings.Contains(out, `"shardInfo":{"selector":"shardRange(`) {
		t.Fatalf("the gated server does not echo the shard selector: %s", out)
	}
	plain := kctltest.Start(t).Kubectl(t, "get", "--raw", "/api/v1/namespaces?limit=1")
	if strings.Contains(plain, "shardInfo") {
		t.Fatalf("Start's server has shardInfo: %s", plain)
	}
}
