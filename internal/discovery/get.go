package discovery

// A discovery document read from the server.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/kctl-dev/kctl/internal/transport"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Getter is the Fetch that asks t (its requests counted in obs, nil: not
// counted).
func Getter(t *transport.Client, obs transport.Observer) Fetch {
	return func(ctx context.Context, path string) (map[string]metav1.APIResource, error) {
		return get(ctx, t, obs, path)
	}
}

// get reads the discovery document at path: nil if the server answers
// 404.
func get(
	ctx context.Context,
	t *transport.Client,
	obs transport.Observer,
	path string,
) (map[string]metav1.APIResource, error) {
	r := transport.Request{
		Method: http.MethodGet,
		Path:   path,
		Accept: "application/json",
	}
	resp, err := t.Do(ctx, r, obs)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, fmt.Errorf(
			"kctl: GET %s: reading the discovery document: %w",
			path, err)
	}
	if resp.StatusCode == http.StatusNotFound {
		return nil, nil
	}
	if resp.StatusCode != http.StatusOK {
		return nil, failed(resp, body, path)
	}
	var doc metav1.APIResourceList
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf(
			"kctl: GET %s: decoding the discovery document: %w",
			path, err)
	}
	resources := make(map[string]metav1.APIResource, len(doc.APIResources))
	for _, r := range doc.APIResources {
		resources[r.Name] = r
	}
	return resources, nil
}

// failed is the error of resp, a failed answer to the request for the
// discovery document at path.
func failed(resp *http.Response, body []byte, path string) error {
	gr := schema.GroupResource{}
	se, _ := transport.StatusError(resp, body, http.MethodGet, gr, "")
	if apierrors.IsForbidden(se) {
		return fmt.Errorf(
			"kctl: GET %s (the discovery document): %w: "+
				"grant this identity the system:discovery ClusterRole",
			path, se)
	}
	return fmt.Errorf(
		"kctl: GET %s (the discovery document): %w",
		path, se)
}
