// Package clusterconfig finds and loads a cluster configuration the way
// kctl.LoadConfig documents: the path given, then $KUBECONFIG, then the
// in-cluster service account, then ~/.kube/config. Its errors name the
// source that is broken and what to do; its warnings (a missing file among
// others in $KUBECONFIG, a cluster that skips TLS verification) go to the
// logger given.
package clusterconfig

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/homedir"
)

// Load finds the cluster configuration, trying in order: the path given
// (a --kubeconfig flag; "" skips it), $KUBECONFIG (files, merged), the
// in-cluster service account, ~/.kube/config. The first source present
// wins, even if broken; when none is, the error lists what was tried.
// kubeContext names the kubeconfig context to use ("": the current one);
// log gets the warnings.
func Load(
	kubeconfig string,
	kubeContext string,
	log *slog.Logger,
) (*rest.Config, error) {
	k := loading{context: kubeContext, log: log}
	if kubeconfig != "" {
		_, err := os.Stat(kubeconfig)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("kctl: the kubeconfig %s "+
				"(Options.Kubeconfig, a --kubeconfig flag) "+
				"does not exist: correct the path, or give "+
				"none to use $KUBECONFIG, the in-cluster "+
				"service account or ~/.kube/config",
				kubeconfig)
		}
		k.what = "the kubeconfig " + kubeconfig
		k.rules.ExplicitPath = kubeconfig
		return k.load()
	}
	env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar)
	if env != "" {
		files, err := envFiles(env, log)
		if err != nil {
			return nil, err
		}
		k.what = "$KUBECONFIG (" + env + ")"
		k.rules.Precedence = files
		return k.load()
	}
	cfg, err := rest.InClusterConfig()
	if !errors.Is(err, rest.ErrNotInCluster) {
		if err != nil {
			return nil, fmt.Errorf(
				"kctl: loading the in-cluster configuration: %w", err)
		}
		if kubeContext != "" {
			return nil, fmt.Errorf("kctl: kubeconfig context %q "+
				"asked, but the configuration is the in-cluster "+
				"service account, which has none: "+
				"pass a kubeconfig too, or no context",
				kubeContext)
		}
		return cfg, nil
	}
	home := filepath.Join(
		homedir.HomeDir(),
		clientcmd.RecommendedHomeDir,
		clientcmd.RecommendedFileName,
	)
	if _, err := os.Stat(home); err == nil {
		k.what = home
		k.rules.ExplicitPath = home
		return k.load()
	}
	return nil, fmt.Errorf("kctl: no cluster configuration found; "+
		"tried the --kubeconfig flag (not given), "+
		"$KUBECONFIG (not set), "+
		"the in-cluster service account "+
		"(KUBERNETES_SERVICE_HOST/PORT not set) "+
		"and %s (does not exist): "+
		"pass --kubeconfig or set $KUBECONFIG", home)
}

// envFiles returns the files $KUBECONFIG (env) lists that exist,
// logging a warning for each one that does not. None existing is an
// error: client-go would load an empty configuration and say only
// that none was provided.
func envFiles(
	env string,
	log *slog.Logger,
) ([]string, error) {
	var found []string
	var missing []string
	for _, f := range filepath.SplitList(env) {
		_, err := os.Stat(f)
		switch {
		case f == "":
			// an empty entry, as in "a::b"
		case errors.Is(err, fs.ErrNotExist):
			missing = append(missing, f)
		default:
			// present, or unreadable: loading says why
			found = append(found, f)
		}
	}
	if len(found) == 0 && len(missing) == 0 {
		return nil, fmt.Errorf("kctl: $KUBECONFIG (%q) "+
			"names no file: correct or unset it", env)
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("kctl: $KUBECONFIG names %s, "+
			"and no such file exists: correct $KUBECONFIG, "+
			"or unset it to use the in-cluster service account "+
			"or ~/.kube/config", strings.Join(missing, ", "))
	}
	for _, f := range missing {
		log.Warn("kctl: $KUBECONFIG names a file that "+
			"does not exist; loading the others",
			"file", f)
	}
	return found, nil
}

// loading is one load of kubeconfig files: rules name them, what names
// them in errors and warnings, context is the one to use ("": the
// current one), and log gets the warnings.
type loading struct {
	what    string
	rules   clientcmd.ClientConfigLoadingRules
	context string
	log     *slog.Logger
}

// load loads the configuration of k.context, warning once if its
// cluster skips TLS verification.
func (k *loading) load() (*rest.Config, error) {
	overrides := &clientcmd.ConfigOverrides{
		CurrentContext: k.context,
	}
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&k.rules,
		overrides,
	)
	raw, err := loader.RawConfig()
	if err != nil {
		return nil, fmt.Errorf("kctl: loading %s: %w", k.what, err)
	}
	_, ok := raw.Contexts[k.context]
	if k.context != "" && !ok {
		names := slices.Sorted(maps.Keys(raw.Contexts))
		return nil, fmt.Errorf("kctl: %s has no context %q: "+
			"pick one of %q", k.what, k.context, names)
	}
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kctl: loading %s: %w", k.what, err)
	}
	if cfg.Insecure {
		k.warnInsecure(raw)
	}
	return cfg, nil
}

// warnInsecure warns that the cluster of the context used skips TLS
// verification.
func (k *loading) warnInsecure(raw clientcmdapi.Config) {
	name := cmp.Or(k.context, raw.CurrentContext)
	cluster := ""
	c := raw.Contexts[name]
	if c != nil {
		cluster = c.Cluster
	}
	k.log.Warn(fmt.Sprintf("kctl: cluster %q in %s sets "+
		"insecure-skip-tls-verify: the API server's certificate "+
		"is not checked; set certificate-authority-data instead",
		cluster, k.what),
		"cluster", cluster,
		"context", name)
}
