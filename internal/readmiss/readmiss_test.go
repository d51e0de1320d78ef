package readmiss

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/kctl-dev/kctl/internal/apitype"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

func TestCheck_RefusesFailsOrWarnsOfAnUnscopedType(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	refusal := errors.New("kctl: held as metadata only")

	if err := Check("pods", refusal, true, false, log); err != refusal {
		t.Errorf("with a refusal: %v, want the refusal, first", err)
	}
	err := Check("secrets", nil, true, false, log)
	if !errors.Is(err, ErrNotCached) {
		t.Errorf("failOnMissing: %v, want ErrNotCached", err)
	}
	want := "kctl: a cached read of secrets, which the cache does not watch " +
		"(CacheOptions.ReaderFailOnMissingInformer): watch it first " +
		"(kctl.InformerFor, Owns, Watches), or read with Uncached(): type not cached"
	if err == nil || err.Error() != want {
		t.Errorf("failOnMissing: %q, want %q", err, want)
	}
	if buf.Len() != 0 {
		t.Errorf("a refused or failed read warned: %s", buf.String())
	}

	if err := Check("secrets", nil, false, true, log); err != nil || buf.Len() != 0 {
		t.Errorf("a scoped read: %v, log %q; want nil, no warning", err, buf.String())
	}
	if err := Check("secrets", nil, false, false, log); err != nil {
		t.Errorf("an unscoped read: %v, want nil", err)
	}
	if !strings.Contains(buf.String(), "a client read started caching every secrets in the cluster") {
		t.Errorf("an unscoped read did not warn: %q", buf.String())
	}
}

func TestNotFound_MatchesIsNotFoundAndNamesTheCache(t *testing.T) {
	deployments := apitype.Resource{Group: "apps", Version: "v1", Kind: "Deployment", Plural: "deployments", Namespaced: true}
	err := NotFound(deployments, "shop/web", "web")
	if !apierrors.IsNotFound(err) {
		t.Errorf("NotFound = %v, want it to match apierrors.IsNotFound", err)
	}
	want := `kctl: get deployments.apps/v1 shop/web (from the cache): deployments.apps "web" not found`
	if err.Error() != want {
		t.Errorf("NotFound = %q, want %q", err, want)
	}
}
