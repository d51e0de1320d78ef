package kctl

// Issue 23, item 8: a kubeconfig context is picked with Options.Context; a
// $KUBECONFIG naming a missing file says so; insecure-skip-tls-verify is
// warned about once, naming the cluster. Against the real control plane.

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kctl-dev/kctl/internal/controlplane"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// testKubeconfig writes a kubeconfig to a new file and returns its path.
// Its context "real" is the control plane's admin; edit changes it before
// it is written.
func testKubeconfig(t *testing.T, edit func(k *clientcmdapi.Config)) string {
	t.Helper()
	k, err := clientcmd.LoadFromFile(controlplane.Require(t).Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	cur := k.Contexts[k.CurrentContext]
	k.Contexts = map[string]*clientcmdapi.Context{"real": cur}
	k.CurrentContext = "real"
	edit(k)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*k, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// getDefaultNamespace asks mgr's server for Namespace default.
func getDefaultNamespace(t *testing.T, mgr *Manager) error {
	t.Helper()
	_, err := NewClient[corev1.Namespace](mgr.conn).Get(t.Context(), "", "default")
	return err
}

// newLoggedManager makes a Manager from opts whose log goes to the
// returned buffer.
func newLoggedManager(t *testing.T, opts Options) (*Manager, *logBuffer, error) {
	t.Helper()
	logs := &logBuffer{}
	opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
	mgr, err := NewManager(opts)
	return mgr, logs, err
}

func TestOptionsContext_PicksAContextOfTheKubeconfig(t *testing.T) {
	path := testKubeconfig(t, func(k *clientcmdapi.Config) {
		real := k.Contexts["real"]
		k.Clusters["nowhere"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
		k.Contexts["broken"] = &clientcmdapi.Context{Cluster: "nowhere", AuthInfo: real.AuthInfo}
		k.CurrentContext = "broken"
	})

	mgr, _, err := newLoggedManager(t, Options{Kubeconfig: path, Context: "real"})
	if err != nil {
		t.Fatal(err)
	}
	if err := getDefaultNamespace(t, mgr); err != nil {
		t.Errorf("Context real: %v, want the control plane to answer", err)
	}

	mgr, _, err = newLoggedManager(t, Options{Kubeconfig: path})
	if err != nil {
		t.Fatal(err)
	}
	if host := mgr.Config().Host; host != "https://127.0.0.1:1" {
		t.Errorf("no Context: host %q, want the current-context's https://127.0.0.1:1", host)
	}

	_, _, err = newLoggedManager(t, Options{Kubeconfig: path, Context: "missing"})
	want := `kctl: the kubeconfig ` + path + ` has no context "missing": pick one of ["broken" "real"]`
	if err == nil || err.Error() != want {
		t.Errorf("Context missing: error %v\nwant %s", err, want)
	}
}

func TestKubeconfigEnv_MissingFile_ErrorNamesTheVariableAndTheFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-kubeconfig")
	t.Setenv("KUBECONFIG", missing)
	_, _, err := newLoggedManager(t, Options{})
	if err == nil {
		t.Fatal("NewManager succeeded with $KUBECONFIG naming a missing file")
	}
	for _, want := range []string{"kctl: $KUBECONFIG names " + missing, "no such file exists", "correct $KUBECONFIG"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	sep := string(filepath.ListSeparator)
	t.Setenv("KUBECONFIG", sep+sep)
	_, _, err = newLoggedManager(t, Options{})
	if want := `kctl: $KUBECONFIG ("` + sep + sep + `") names no file: correct or unset it`; err == nil || err.Error() != want {
		t.Errorf("$KUBECONFIG of separators only: error %v, want %s", err, want)
	}
}

func TestOptionsKubeconfig_MissingFile_ErrorNamesIt(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-kubeconfig")
	_, _, err := newLoggedManager(t, Options{Kubeconfig: missing})
	want := "kctl: the kubeconfig " + missing + " (Options.Kubeconfig, a --kubeconfig flag) does not exist: correct the path"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %v\nwant one starting %s", err, want)
	}
}

func TestKubeconfigEnv_OneMissingAmongOthers_IsSkippedWithAWarning(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-kubeconfig")
	path := testKubeconfig(t, func(*clientcmdapi.Config) {})
	t.Setenv("KUBECONFIG", missing+string(filepath.ListSeparator)+path)
	mgr, logs, err := newLoggedManager(t, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := getDefaultNamespace(t, mgr); err != nil {
		t.Errorf("the file that exists was not used: %v", err)
	}
	if n := len(logs.lines("level=WARN msg=\"kctl: $KUBECONFIG names a file that does not exist; loading the others\" file=" + missing)); n != 1 {
		t.Errorf("%d warnings naming %s, want 1:\n%s", n, missing, logs)
	}
}

func TestKubeconfigInsecure_WarnedOnceNamingTheCluster(t *testing.T) {
	path := testKubeconfig(t, func(k *clientcmdapi.Config) {
		real := k.Contexts["real"]
		server := k.Clusters[real.Cluster].Server
		k.Clusters["lab-insecure"] = &clientcmdapi.Cluster{Server: server, InsecureSkipTLSVerify: true}
		real.Cluster = "lab-insecure"
	})
	mgr, logs, err := newLoggedManager(t, Options{Kubeconfig: path})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := getDefaultNamespace(t, mgr); err != nil {
			t.Fatal(err)
		}
	}
	want := `kctl: cluster \"lab-insecure\" in the kubeconfig ` + path + ` sets insecure-skip-tls-verify`
	if n := len(logs.lines(want)); n != 1 || len(logs.lines("level=WARN")) != 1 {
		t.Errorf("logged:\n%s\nwant one warning containing %s", logs, want)
	}

	secure := testKubeconfig(t, func(*clientcmdapi.Config) {})
	_, logs, err = newLoggedManager(t, Options{Kubeconfig: secure})
	if err != nil {
		t.Fatal(err)
	}
	if s := logs.String(); s != "" {
		t.Errorf("a kubeconfig with a CA logged:\n%s", s)
	}
}
