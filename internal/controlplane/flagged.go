package controlplane

import (
	"fmt"
	"os"
	"strings"
	"sync"
)

// flagged holds the control planes started with extra kube-apiserver flags
// (RequireFlags), one per distinct flag list, and the one with a
// kube-controller-manager (RequireControllerManager), stopped with the shared one.
// Once stopped is set, no new one starts.
var flagged struct {
	mu       sync.Mutex
	clusters map[string]*flaggedCluster
	stopped  bool
}

// flaggedCluster is one of them. Once start has run, c or err is set and
// never changes.
type flaggedCluster struct {
	once   sync.Once
	c      *Cluster
	reaper *Reaper
	err    error
}

// RequireFlags is Require for a control plane whose kube-apiserver also gets
// apiFlags, e.g. "--feature-gates=ShardedListAndWatch=true": a test binary
// starts one such control plane per distinct list, on first use (about 5 s),
// besides the shared one, and RunTests stops them all. With no flags it is
// Require. Like Require, it skips t (or fails it when $CI is true) when the
// control plane cannot start.
func RequireFlags(t T, apiFlags ...string) *Cluster {
	t.Helper()
	if len(apiFlags) == 0 {
		return Require(t)
	}
	return requireOther(t, apiFlags, false)
}

// RequireControllerManager is Require for a control plane that also runs
// kube-controller-manager with its garbage collector and namespace
// controller (see Cluster.ControllerManager): a test binary starts one, on
// first use, besides the shared one, building kube-controller-manager first
// if need be (see ControllerManager). Like Require, it skips t (or fails it
// when $CI is true) when the control plane cannot start.
func RequireControllerManager(t T) *Cluster {
	t.Helper()
	return requireOther(t, nil, true)
}

// requireOther starts, or returns, the control plane with apiFlags and, if
// kcm, a kube-controller-manager.
func requireOther(t T, apiFlags []string, kcm bool) *Cluster {
	t.Helper()
	if !shared.main.Load() {
		t.Fatal("kctl: the control plane needs TestMain to stop it after the tests: add\n" +
			"\tfunc TestMain(m *testing.M) { os.Exit(kctltest.Main(m)) }")
	}
	key := strings.Join(apiFlags, "\x00")
	what := strings.Join(apiFlags, " ")
	if kcm {
		key += "\x00" + ControllerManagerBinary
		what = "a kube-controller-manager"
	}
	flagged.mu.Lock()
	if flagged.clusters == nil {
		flagged.clusters = map[string]*flaggedCluster{}
	}
	fc := flagged.clusters[key]
	if fc == nil {
		fc = &flaggedCluster{}
		flagged.clusters[key] = fc
	}
	stopped := flagged.stopped
	flagged.mu.Unlock()
	if stopped {
		t.Fatal("kctl: the tests are over: no control plane starts any more")
	}
	flags := append([]string(nil), apiFlags...)
	fc.once.Do(func() {
		fc.c, fc.reaper, fc.err = startCluster(deadlineOf(t), flags, kcm)
	})
	if fc.err == nil {
		return fc.c
	}
	msg := fmt.Sprintf("kctl: cannot start a local control plane with %s: %v", what, fc.err)
	if isCI() {
		t.Fatalf("%s\n(CI=true: an integration test never skips)", msg)
	}
	shared.skipped.Add(1)
	t.Skip(msg)
	return nil
}

// stopFlagged stops the control planes RequireFlags started and removes
// their files. A start in progress is waited for.
func stopFlagged() {
	flagged.mu.Lock()
	flagged.stopped = true
	list := make([]*flaggedCluster, 0, len(flagged.clusters))
	for _, fc := range flagged.clusters {
		list = append(list, fc)
	}
	flagged.mu.Unlock()
	for _, fc := range list {
		fc.once.Do(func() { fc.err = fmt.Errorf("the tests are over") })
		if fc.c != nil {
			fc.c.Down()
			os.RemoveAll(fc.c.Dir)
		}
		fc.reaper.Close()
	}
}
