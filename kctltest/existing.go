package kctltest

import (
	"cmp"
	"fmt"
	"os"
	"strconv"
	"sync"

	"k8s.io/client-go/tools/clientcmd"
)

// ClusterEnv names the variable that points the tests at an existing cluster
// instead of a control plane of their own: the path of a kubeconfig, whose
// current context is used, or the context $KCTLTEST_CONTEXT names.
//
//	KCTLTEST_KUBECONFIG=$HOME/.kube/config go test ./...
//
// Then Start and StartWithControllerManager return an Env on that cluster
// (its own controller-manager collects garbage and deletes namespaces), and
// nothing is built or started. Each test works in the namespaces Namespace
// makes for it, deleted at its end. Apply and Delete refuse to write outside
// them: a cluster-scoped object (a CRD, a ClusterRole) or a namespace the
// test did not make is refused, naming $KCTLTEST_CLUSTER_WRITES, unless it
// is true. StartWithFlags and RestartAPIServer need a kube-apiserver of
// kctltest's own and fail the test; Kubectl runs the kubectl on $PATH.
const ClusterEnv = "KCTLTEST_KUBECONFIG"

// ContextEnv names the kubeconfig context to use with ClusterEnv; empty:
// the kubeconfig's current context.
const ContextEnv = "KCTLTEST_CONTEXT"

// ClusterWritesEnv names the variable that, when true, lets Apply and
// Delete write cluster-scoped objects and other namespaces of the existing
// cluster ClusterEnv names.
const ClusterWritesEnv = "KCTLTEST_CLUSTER_WRITES"

var existing struct {
	once sync.Once
	e    *Env
	err  error
}

// existingEnv returns the Env of the cluster ClusterEnv names, made on
// first use.
func existingEnv(t TB, kubeconfig string) *Env {
	t.Helper()
	existing.once.Do(func() {
		rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig}
		overrides := &clientcmd.ConfigOverrides{CurrentContext: os.Getenv(ContextEnv)}
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
		if err != nil {
			existing.err = fmt.Errorf("%s=%s: %w: point it at a kubeconfig of the cluster to test against, or unset it to start a control plane",
				ClusterEnv, kubeconfig, err)
			return
		}
		existing.e, existing.err = envFor(cfg, kubeconfig)
		if existing.e != nil {
			existing.e.existing = true
			existing.e.namespaces = map[string]bool{}
		}
	})
	if existing.err != nil {
		t.Fatalf("kctltest: %v", existing.err)
	}
	return existing.e
}

// mayWrite returns an error unless e may write obj, whose resource is
// namespaced or not: on an existing cluster, only into the test's
// namespaces unless ClusterWritesEnv is true.
func (e *Env) mayWrite(obj object, namespaced bool) error {
	if !e.existing {
		return nil
	}
	if allowed, _ := strconv.ParseBool(os.Getenv(ClusterWritesEnv)); allowed {
		return nil
	}
	if !namespaced {
		return fmt.Errorf("%s is cluster-scoped, and the cluster is an existing one (%s): kctltest writes only into the namespaces Namespace made; "+
			"set %s=true to let the tests write cluster-wide, or install it in the cluster before the tests", obj, ClusterEnv, ClusterWritesEnv)
	}
	e.mu.Lock()
	ours := e.namespaces[cmp.Or(obj.namespace, "default")]
	e.mu.Unlock()
	if !ours {
		return fmt.Errorf("%s is in namespace %q, which this test did not make, and the cluster is an existing one (%s): "+
			"give it a namespace from env.Namespace(t), or set %s=true", obj, cmp.Or(obj.namespace, "default"), ClusterEnv, ClusterWritesEnv)
	}
	return nil
}
