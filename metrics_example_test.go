package kctl_test

import (
	"fmt"

	"github.com/kctl-dev/kctl"
	"k8s.io/client-go/rest"
)

// A program's own metrics, on the page that mgr.ServeMetrics serves.
func ExampleManager_Metrics() {
	mgr, err := kctl.NewManager(kctl.Options{Config: &rest.Config{Host: "https://127.0.0.1:6443"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	jobs, err := mgr.Metrics().Counter("myapp_jobs_total", "Jobs run, by result.", "result")
	if err != nil {
		fmt.Println(err)
		return
	}
	failed := jobs.With("failed") // look a series up once, use it often
	failed.Inc()
	queued, err := mgr.Metrics().Gauge("myapp_queued_jobs", "Jobs waiting.")
	if err != nil {
		fmt.Println(err)
		return
	}
	queued.Set(3)

	// Mistakes are errors from registration.
	_, err = mgr.Metrics().Counter("myapp_jobs_total", "Registered twice.")
	fmt.Println(err)
	_, err = mgr.Metrics().Gauge("myapp-queue", "Not a Prometheus name.")
	fmt.Println(err)
	// Output:
	// kctl: metric "myapp_jobs_total": myapp_jobs_total is registered already: register each metric once and keep what registration returns
	// kctl: metric "myapp-queue": the name is not a Prometheus metric name, [a-zA-Z_][a-zA-Z0-9_]*
}
