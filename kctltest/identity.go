package kctltest

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// identities is the namespace of the ServiceAccounts Unprivileged makes.
const identities = "kctltest-identities"

// Unprivileged returns a config for a new identity (a ServiceAccount of
// namespace kctltest-identities) that RBAC allows rules, cluster-wide, and
// nothing else: the way to test that a controller's RBAC is enough, or that
// it reports a Forbidden well. It returns once the rules are in force; at
// the end of the test the identity and its rules are deleted. With no
// rules, every request for a resource is Forbidden.
//
//	cfg := env.Unprivileged(t, rbacv1.PolicyRule{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"configmaps"}})
//
// Bounds: 30 s for the rules to be in force.
func (e *Env) Unprivileged(t TB, rules ...rbacv1.PolicyRule) *rest.Config {
	t.Helper()
	e.needsControlPlane(t, "Unprivileged (RBAC)")
	e.ensureNamespace(t, identities)
	name := "user-" + strings.ToLower(rand.Text()[:10])
	e.create(t, "/api/v1/namespaces/"+identities+"/serviceaccounts",
		map[string]any{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": map[string]any{"name": name}})
	role := "kctltest:" + name
	e.create(t, "/apis/rbac.authorization.k8s.io/v1/clusterroles", rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: role},
		Rules:      rules,
	})
	e.create(t, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: role},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: identities}},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
	})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		e.do(ctx, "DELETE", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/"+role, "", "")
		e.do(ctx, "DELETE", "/apis/rbac.authorization.k8s.io/v1/clusterroles/"+role, "", "")
		e.do(ctx, "DELETE", "/api/v1/namespaces/"+identities+"/serviceaccounts/"+name, "", "")
	})
	if len(rules) > 0 {
		e.waitAllowed(t, "system:serviceaccount:"+identities+":"+name, rules[0])
	}
	return e.ServiceAccount(t, identities, name)
}

// ServiceAccount returns a config that authenticates as the ServiceAccount
// namespace/name, which must exist (e.g. from an RBAC manifest the test
// applied), with a 1-hour token from the TokenRequest API, as a Pod running
// as it would.
func (e *Env) ServiceAccount(t TB, namespace, name string) *rest.Config {
	t.Helper()
	e.needsControlPlane(t, "ServiceAccount (authentication)")
	path := fmt.Sprintf("/api/v1/namespaces/%s/serviceaccounts/%s/token", namespace, name)
	body := `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"expirationSeconds":3600}}`
	b := e.mustDo(t, http.StatusCreated, "POST", path, "application/json", body)
	var tr authenticationv1.TokenRequest
	if err := json.Unmarshal(b, &tr); err != nil || tr.Status.Token == "" {
		t.Fatalf("kctltest: a token for ServiceAccount %s/%s: %v in %s", namespace, name, err, b)
	}
	cfg := rest.AnonymousClientConfig(e.cfg)
	cfg.BearerToken = tr.Status.Token
	return cfg
}

// waitAllowed waits until RBAC allows user the first verb of rule (the
// API server's authorizer learns of new bindings through a watch).
func (e *Env) waitAllowed(t TB, user string, rule rbacv1.PolicyRule) {
	t.Helper()
	attrs := &authorizationv1.ResourceAttributes{Verb: first(rule.Verbs)}
	if len(rule.NonResourceURLs) == 0 {
		attrs.Group = first(rule.APIGroups)
		attrs.Resource = first(rule.Resources)
	}
	review := authorizationv1.SubjectAccessReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"},
		Spec:     authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: attrs},
	}
	if len(rule.NonResourceURLs) > 0 {
		review.Spec.ResourceAttributes = nil
		review.Spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: first(rule.NonResourceURLs), Verb: attrs.Verb}
	}
	body, _ := json.Marshal(review)
	deadline := time.Now().Add(30 * time.Second)
	for {
		b := e.mustDo(t, http.StatusCreated, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", "application/json", string(body))
		var answer authorizationv1.SubjectAccessReview
		err := json.Unmarshal(b, &answer)
		if err == nil && answer.Status.Allowed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("kctltest: RBAC does not allow %s %+v 30 s after binding it: %s", user, rule, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// ensureNamespace creates namespace name unless it exists.
func (e *Env) ensureNamespace(t TB, name string) {
	t.Helper()
	body := fmt.Sprintf(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":%q}}`, name)
	code, b, err := e.do(t.Context(), "POST", "/api/v1/namespaces", "application/json", body)
	if err != nil || (code != http.StatusCreated && code != http.StatusConflict) {
		t.Fatalf("kctltest: creating namespace %s: %v %d %s", name, err, code, b)
	}
}

// create POSTs obj as JSON to path and fails t unless it is created.
func (e *Env) create(t TB, path string, obj any) {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	e.mustDo(t, http.StatusCreated, "POST", path, "application/json", string(b))
}
