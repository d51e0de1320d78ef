package main

import (
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/internal/certs"
	"github.com/kctl-dev/kctl/kctltest"
	"github.com/kctl-dev/kctl/webhook"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestCRD_Webhooks_ThroughTheAPIServer: the API server calls the example's
// webhooks on 127.0.0.1, through configurations like webhook.yaml's
// (with a URL instead of the Service) and crd.yaml's conversion stanza
// pointed at the same server.
func TestCRD_Webhooks_ThroughTheAPIServer(t *testing.T) {
	env := kctltest.Start(t)
	env.Apply(t, "crd.yaml")
	ns := env.Namespace(t)
	dir := t.TempDir()
	ca, err := certs.NewCA("widgets test CA")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ca.WriteServing(dir, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	opts := kctl.Options{}
	opts.Cache.DefaultScope.Namespaces = []string{ns}
	env.Manager(t, opts, func(mgr *kctl.Manager) {
		hooks, err := webhook.Serve(mgr, addr, dir)
		if err != nil {
			t.Fatal(err)
		}
		setupWebhooks(hooks)
		setup(mgr)
	})
	bundle := base64.StdEncoding.EncodeToString(ca.PEM())
	for _, kind := range []string{"Validating", "Mutating"} {
		path := "/validate-example-kctl-dev-v1-widget"
		if kind == "Mutating" {
			path = "/mutate-example-kctl-dev-v1-widget"
		}
		config := fmt.Sprintf(`{"apiVersion":"admissionregistration.k8s.io/v1","kind":"%sWebhookConfiguration",
			"metadata":{"name":"widgets-test-%s"},
			"webhooks":[{"name":"widget.example.kctl.dev","clientConfig":{"url":"https://%s%s","caBundle":%q},
			 "rules":[{"apiGroups":["example.kctl.dev"],"apiVersions":["v1"],"resources":["widgets"],"operations":["CREATE","UPDATE"]}],
			 "matchPolicy":"Equivalent","namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":%q}},
			 "failurePolicy":"Fail","sideEffects":"None","admissionReviewVersions":["v1"],"timeoutSeconds":5}]}`,
			kind, ns, addr, path, bundle, ns)
		env.Apply(t, []byte(config))
		defer env.Delete(t, []byte(config))
	}
	env.Kubectl(t, "patch", "crd", "widgets.example.kctl.dev", "--type=merge", "-p",
		fmt.Sprintf(`{"spec":{"conversion":{"webhook":{"clientConfig":{"service":null,"url":"https://%s/convert","caBundle":%q}}}}}`, addr, bundle))
	defer env.Kubectl(t, "patch", "crd", "widgets.example.kctl.dev", "--type=merge", "-p", // as crd.yaml has it, for the other tests
		`{"spec":{"conversion":{"webhook":{"clientConfig":{"url":null,"service":{"namespace":"kctl-crd","name":"widgets-webhook","path":"/convert","port":443},"caBundle":null}}}}}`)

	widgets := kctl.NewClient[Widget](env.Conn)
	v2 := kctl.NewClient[WidgetV2](env.Conn)
	ctx := t.Context()
	bad := &Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad"}}
	bad.Spec.Data = map[string]string{"no spaces": "x"}
	deadline := time.Now().Add(30 * time.Second)
	for err = widgets.Create(ctx, bad); err == nil || !apierrors.IsForbidden(err); err = widgets.Create(ctx, bad) {
		if time.Now().After(deadline) {
			t.Fatalf("a Widget with a bad key was never denied within 30s: %v", err)
		}
		if err == nil {
			widgets.Delete(ctx, ns, "bad") // made before the configuration took effect
		}
		time.Sleep(100 * time.Millisecond) // polling the API server's view of the configuration, with a deadline
	}
	if !strings.Contains(err.Error(), `spec.data key "no spaces"`) {
		t.Errorf("the denial %q does not name the bad key", err)
	}

	good := &Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "good"}}
	good.Spec.Data = map[string]string{"b": "2", "a": "1"}
	if err := widgets.Create(ctx, good); err != nil {
		t.Fatal(err)
	}
	if good.Labels[managedBy] != "kctl-widgets" {
		t.Errorf("labels %v, want %s=kctl-widgets from the defaulting webhook", good.Labels, managedBy)
	}
	empty := filepath.Join(t.TempDir(), "empty.yaml")
	if err := os.WriteFile(empty, []byte("apiVersion: example.kctl.dev/v1\nkind: Widget\nmetadata: {name: empty}\nspec: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := env.Kubectl(t, "apply", "-n", ns, "-f", empty); !strings.Contains(out, "Warning: spec.data is empty: the Widget's ConfigMap will be too") {
		t.Errorf("kubectl apply of a Widget without data printed %q, want the webhook's warning", out)
	}
	got, err := v2.Get(ctx, ns, "good")
	if err != nil {
		t.Fatalf("reading the Widget at v2: %v", err)
	}
	if want := []Item{{"a", "1"}, {"b", "2"}}; fmt.Sprint(got.Spec.Items) != fmt.Sprint(want) {
		t.Errorf("at v2 the items are %v, want %v", got.Spec.Items, want)
	}
	got.Spec.Items = append(got.Spec.Items, Item{"a", "again"})
	err = v2.Update(ctx, got)
	if err == nil || !strings.Contains(err.Error(), `lists key "a" twice`) {
		t.Errorf("updating at v2 with a key twice: %v, want the conversion's error", err)
	}
}
