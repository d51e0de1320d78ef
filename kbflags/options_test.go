package kbflags

import (
	"path/filepath"
	"testing"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/kctltest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// --kubeconfig and --context pick a context of a kubeconfig whose
// current-context points nowhere.
func TestOptions_ContextFlagPicksTheContext(t *testing.T) {
	env := kctltest.Start(t)
	k, err := clientcmd.LoadFromFile(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	real := k.Contexts[k.CurrentContext]
	k.Contexts["real"] = real
	k.Clusters["nowhere"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	k.Contexts["broken"] = &clientcmdapi.Context{Cluster: "nowhere", AuthInfo: real.AuthInfo}
	k.CurrentContext = "broken"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*k, path); err != nil {
		t.Fatal(err)
	}

	log := kctltest.Logger(t)
	for _, tc := range []struct {
		context string
		host    string
	}{
		{"", "https://127.0.0.1:1"},
		{"real", env.Config().Host},
	} {
		f := parsed(t, "--kubeconfig="+path, "--context="+tc.context)
		mgr, err := kctl.NewManager(f.Options(log))
		if err != nil {
			t.Fatalf("--context=%q: %v", tc.context, err)
		}
		if got := mgr.Config().Host; got != tc.host {
			t.Errorf("--context=%q: host %s, want %s", tc.context, got, tc.host)
		}
	}
	f := parsed(t, "--kubeconfig="+path, "--context=real")
	mgr, err := kctl.NewManager(f.Options(log))
	if err != nil {
		t.Fatal(err)
	}
	namespaces := kctl.ClientFor[corev1.Namespace](mgr).Uncached()
	if _, err := namespaces.Get(t.Context(), "", "default"); err != nil {
		t.Errorf("--context=real: %v, want the control plane to answer", err)
	}
}
