// Command trigger reconciles from outside the cluster: it mirrors a web page
// (--source) into ConfigMap "mirror" of one namespace, and runs when a POST
// to /trigger arrives (a webhook), when a ticker sees the page change, or
// when someone edits the mirror. It is a controller of keys
// (kctl.NewKeyController): every source enqueues one key, which names the
// mirror whether or not the mirror exists yet.
//
//	go run ./example/trigger --kubeconfig ~/.kube/config --source https://example.com/
//	curl -X POST 127.0.0.1:8082/trigger && kubectl get configmap mirror -o yaml
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/kbflags"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func main() {
	f := newFlags(flag.CommandLine)
	flag.Parse()
	log, err := f.Logger(os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	opts := f.Options(log)                                                  // --kubeconfig, --context
	opts.Cache.DefaultScope = kctl.Scope{Namespaces: []string{f.namespace}} // cache one namespace's ConfigMaps
	mgr, err := kctl.NewManager(opts)
	if err == nil {
		err = f.Serve(mgr, kctl.LeaderElection{Name: "trigger"}) // metrics, probes, leader election as asked
	}
	var ln net.Listener
	if err == nil {
		ln, err = net.Listen("tcp", f.httpAddr)
	}
	if err == nil {
		err = setup(mgr, f.namespace, f.source, ln, time.NewTicker(f.every).C)
	}
	if err == nil {
		err = mgr.Start(kctl.SignalContext()) // until SIGINT or SIGTERM
	}
	if err != nil {
		log.Error("trigger stopped", "err", err)
		os.Exit(1)
	}
}

// flags are trigger's command-line flags: kubebuilder's, so that its
// manifests and habits carry over, and those of the page and the endpoint.
type flags struct {
	*kbflags.Flags
	httpAddr  string
	namespace string
	source    string
	every     time.Duration
}

// newFlags defines trigger's flags on fs; main and the tests call it.
func newFlags(fs *flag.FlagSet) *flags {
	f := &flags{Flags: kbflags.Register(fs, "run the controller, the ticker and /trigger only on the replica holding the Lease trigger")}
	fs.StringVar(&f.httpAddr, "http-addr", "127.0.0.1:8082", "serve POST /trigger here")
	fs.StringVar(&f.namespace, "namespace", "default", "write ConfigMap mirror in this namespace")
	fs.StringVar(&f.source, "source", "https://example.com/", "URL of the page to mirror")
	fs.DurationVar(&f.every, "every", time.Minute, "look for a change of the page this often")
	return f
}

// setup adds the trigger controller and its endpoint on ln to mgr; the tests call it too.
func setup(mgr *kctl.Manager, ns, source string, ln net.Listener, ticks <-chan time.Time) error {
	key := kctl.Key{Namespace: ns, Name: "mirror"}          // the one key: ConfigMap ns/mirror
	cms := kctl.ClientFor[corev1.ConfigMap](mgr).Uncached() // our last write may not be cached yet: read the server
	// A controller of keys: reconcile reads the page and writes the ConfigMap
	// the key names, which need not exist yet.
	c := kctl.NewKeyController(mgr, "trigger", func(ctx context.Context, k kctl.Key) (kctl.Result, error) {
		body, err := fetch(source)
		if err != nil {
			return kctl.Result{}, err // retried with backoff
		}
		mirror := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name}}
		op, err := kctl.CreateOrUpdate(ctx, cms, mirror, func(cm *corev1.ConfigMap) error {
			cm.Data = map[string]string{"source": source, "body": body}
			return nil
		})
		t, _ := kctl.TriggerFrom(ctx) // why this reconcile runs: manual, channel, mapped...
		kctl.LoggerFrom(ctx).Info("mirrored", "trigger", t.Cause, "detail", t.Detail, "configMap", op)
		return kctl.Result{}, err
	})
	// The first reconcile: a key enqueued before the controller runs is kept until it does.
	c.Enqueue(key)
	// Any change to ConfigMap mirror (an edit, a delete) enqueues the key: it is put back.
	kctl.Watches(c, func(cm *corev1.ConfigMap) []kctl.Key {
		if cm.Namespace == ns && cm.Name == "mirror" {
			return []kctl.Key{key}
		}
		return nil
	})
	// Ticks enqueue the key, but the filter lets through only those on which the page changed.
	// The reader runs on every replica: a standby fetches the page too, and keeps the key until it leads.
	kctl.FromChannel(c, ticks, changes(source), func(time.Time) []kctl.Key { return []kctl.Key{key} })
	// POST /trigger asks for a reconcile now (c.Enqueue). NeedLeader starts the
	// endpoint with the controller, after the caches have synced.
	mux := http.NewServeMux()
	mux.HandleFunc("POST /trigger", func(w http.ResponseWriter, _ *http.Request) { c.Enqueue(key); w.WriteHeader(http.StatusAccepted) })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	return mgr.Add(kctl.Runnable{Name: "trigger endpoint", NeedLeader: true, Run: func(ctx context.Context) error {
		context.AfterFunc(ctx, func() { srv.Close() })
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}})
}

// changes returns the ticker's filter: it passes a tick if the page changed since the last tick.
func changes(source string) func(time.Time) bool {
	last := "" // the filter runs on the channel source's one goroutine: no lock
	return func(time.Time) bool {
		body, err := fetch(source)
		isNew := err == nil && body != last
		last = body
		return isNew
	}
}

// fetch returns the body of url, at most 512 KiB: a ConfigMap holds at most 1 MiB.
func fetch(url string) (string, error) {
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 512<<10))
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(body), err
}
