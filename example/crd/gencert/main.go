// Command gencert makes a CA and a serving certificate for the Widget
// webhooks, for a cluster without cert-manager or a local run:
//
//	go run ./example/crd/gencert -dir /tmp/widgets-certs -host widgets-webhook.kctl-crd.svc
//
// writes dir/tls.crt and dir/tls.key (the webhook server's, for
// --webhook-cert-path or a kubernetes.io/tls Secret), dir/ca.crt, and
// dir/ca.base64: the caBundle that the commented lines
// "# caBundle: CA_BUNDLE" of crd.yaml and webhook.yaml stand for. The
// CA's key is not kept: run it again (and apply again) to renew, within
// the year the certificate lasts.
package main

import (
	"encoding/base64"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/kctl-dev/kctl/internal/certs"
)

func main() {
	dir := flag.String("dir", "", "directory to write tls.crt, tls.key, ca.crt and ca.base64 to")
	hosts := flag.String("host", "widgets-webhook.kctl-crd.svc", "comma-separated DNS names or IP addresses of the webhook server")
	flag.Parse()
	err := run(*dir, strings.Split(*hosts, ","))
	if err != nil {
		fmt.Fprintln(os.Stderr, "gencert:", err)
		os.Exit(1)
	}
}

func run(dir string, hosts []string) error {
	if dir == "" {
		return fmt.Errorf("-dir is required")
	}
	err := os.MkdirAll(dir, 0o700)
	if err != nil {
		return err
	}
	ca, err := certs.NewCA("widgets webhook CA")
	if err != nil {
		return err
	}
	_, err = ca.WriteServing(dir, hosts...)
	if err != nil {
		return err
	}
	err = os.WriteFile(filepath.Join(dir, "ca.crt"), ca.PEM(), 0o644)
	if err != nil {
		return err
	}
	bundle := base64.StdEncoding.EncodeToString(ca.PEM())
	return os.WriteFile(filepath.Join(dir, "ca.base64"), []byte(bundle), 0o644)
}
