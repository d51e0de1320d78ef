// Package kbflags gives a controller's main.go the command-line flags of a
// kubebuilder project (--kubeconfig, --context, --metrics-bind-address,
// --metrics-secure, --metrics-cert-path, --health-probe-bind-address,
// --leader-elect, --log-level, --log-format), so that its manifests and
// habits carry over, in one line:
//
//	f := kbflags.Register(flag.CommandLine, "run the controller only on the replica holding the Lease podcount")
//	flag.Parse()
//	log, err := f.Logger(os.Stderr)
//	mgr, err := kctl.NewManager(f.Options(log))
//	err = f.Serve(mgr, kctl.LeaderElection{Name: "podcount"})
//
// kctl's examples use it, and their tests check their manifests' args
// against it (ParseDeploymentArgs). It uses only kctl's exported API: a
// program that does not import it links none of it.
//
// --webhook-cert-path is not here: it belongs to a program that serves
// webhooks (example/crd), where it says where their certificate is.
package kbflags

import (
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/kctl-dev/kctl"
)

// Flags are the values of the flags Register defines, once the flag set
// is parsed. The addresses are loopback by default, for a run on a
// laptop; a Pod passes ":8443" and ":8081".
type Flags struct {
	Kubeconfig      string // --kubeconfig
	Context         string // --context: the kubeconfig context; "": its current-context
	MetricsAddr     string // --metrics-bind-address; "" serves no metrics
	MetricsSecure   bool   // --metrics-secure: HTTPS, scrapers' tokens checked
	MetricsCertPath string // --metrics-cert-path; "": a self-signed certificate
	HealthAddr      string // --health-probe-bind-address; "" serves no probes
	LeaderElect     bool   // --leader-elect
	LogLevel        string // --log-level: debug, info, warn or error
	LogFormat       string // --log-format: text or json
}

// Register defines kubebuilder's flags on fs and returns where their
// values go. leaderHelp says what --leader-elect does in this program.
func Register(fs *flag.FlagSet, leaderHelp string) *Flags {
	f := &Flags{}
	fs.StringVar(&f.Kubeconfig, "kubeconfig", "", "kubeconfig file; default: $KUBECONFIG, in-cluster, then ~/.kube/config")
	fs.StringVar(&f.Context, "context", "", "the kubeconfig context to use; default: its current-context")
	fs.StringVar(&f.MetricsAddr, "metrics-bind-address", "127.0.0.1:8080", `serve /metrics here ("" turns it off; ":8443" with --metrics-secure in a Pod)`)
	fs.BoolVar(&f.MetricsSecure, "metrics-secure", false, "serve /metrics over HTTPS to scrapers whose token may get /metrics (see rbac.yaml)")
	fs.StringVar(&f.MetricsCertPath, "metrics-cert-path", "", "directory of tls.crt and tls.key for --metrics-secure; default: a self-signed certificate")
	fs.StringVar(&f.HealthAddr, "health-probe-bind-address", "127.0.0.1:8081", `serve /healthz and /readyz here ("" turns it off)`)
	fs.BoolVar(&f.LeaderElect, "leader-elect", false, leaderHelp)
	fs.StringVar(&f.LogLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&f.LogFormat, "log-format", "text", "text or json")
	return f
}

// Logger is the logger --log-level and --log-format ask for, writing to
// w; an error names the flag whose value is wrong.
func (f *Flags) Logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	err := level.UnmarshalText([]byte(f.LogLevel))
	if err != nil {
		return nil, fmt.Errorf("--log-level=%s: want debug, info, warn or error", f.LogLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch f.LogFormat {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format=%s: want text or json", f.LogFormat)
}

// Options are the Manager's options the flags ask for: --kubeconfig,
// --context, and log (from Logger). Set the others on the result:
//
//	opts := f.Options(log)
//	opts.ShutdownTimeout = time.Minute
//	mgr, err := kctl.NewManager(opts)
func (f *Flags) Options(log *slog.Logger) kctl.Options {
	return kctl.Options{
		Kubeconfig: f.Kubeconfig,
		Context:    f.Context,
		Logger:     log,
	}
}

// Serve turns on in mgr, before its Start, what the flags ask for: the
// metrics page (over HTTPS with --metrics-secure), the probes, and with
// --leader-elect the election le describes.
func (f *Flags) Serve(mgr *kctl.Manager, le kctl.LeaderElection) error {
	var err error
	if f.MetricsSecure {
		err = mgr.ServeSecureMetrics(f.MetricsAddr, f.MetricsCertPath)
	} else {
		err = mgr.ServeMetrics(f.MetricsAddr)
	}
	if err == nil {
		err = mgr.ServeHealth(f.HealthAddr)
	}
	if err == nil && f.LeaderElect {
		err = mgr.ElectLeader(le)
	}
	return err
}
