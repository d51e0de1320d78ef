// Package example holds no program: each example is a folder of its own.
// This test checks what their manifests claim that a server dry run (the
// examples' own *_Manifests_PassServerDryRun tests) does not: that the
// Deployments are hardened and the RBAC grants no wildcard.
package example

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

func TestExamples_Manifests_AreHardenedAndLeastPrivilege(t *testing.T) {
	dirs, _ := filepath.Glob("*/deployment.yaml")
	if len(dirs) == 0 {
		t.Fatal("no example has a deployment.yaml")
	}
	for _, d := range dirs {
		dir := filepath.Dir(d)
		t.Run(dir, func(t *testing.T) {
			wantHardened(t, dir)
			wantNoWildcards(t, filepath.Join(dir, "rbac.yaml"))
		})
	}
}

// wantHardened checks the Deployment of dir/deployment.yaml: its pod runs as
// a non-root user (the one dir/Dockerfile sets) under the RuntimeDefault
// seccomp profile, with no host namespaces, and each container has a
// read-only root filesystem, no privilege escalation, no capabilities and a
// memory limit.
func wantHardened(t *testing.T, dir string) {
	t.Helper()
	var deployments []appsv1.Deployment
	for _, doc := range documents(t, filepath.Join(dir, "deployment.yaml")) {
		var d appsv1.Deployment
		if err := utilyaml.Unmarshal(doc, &d); err != nil {
			t.Fatal(err)
		}
		if d.Kind == "Deployment" {
			deployments = append(deployments, d)
		}
	}
	if len(deployments) != 1 {
		t.Fatalf("%s/deployment.yaml holds %d Deployments, want 1", dir, len(deployments))
	}
	wantHardenedPod(t, dir, "Deployment", deployments[0].Spec.Template.Spec)
	sts := filepath.Join(dir, "statefulset.yaml")
	if _, err := os.Stat(sts); err != nil {
		return // no sharded variant
	}
	for _, doc := range documents(t, sts) {
		var s appsv1.StatefulSet
		if err := utilyaml.Unmarshal(doc, &s); err != nil {
			t.Fatal(err)
		}
		if s.Kind == "StatefulSet" {
			wantHardenedPod(t, dir, "StatefulSet", s.Spec.Template.Spec)
		}
	}
}

// wantHardenedPod checks the pod of a workload of dir as wantHardened says.
func wantHardenedPod(t *testing.T, dir, kind string, pod corev1.PodSpec) {
	t.Helper()
	psc := pod.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	if !isTrue(psc.RunAsNonRoot) || psc.RunAsUser == nil || *psc.RunAsUser == 0 || psc.RunAsGroup == nil ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext = %+v, want runAsNonRoot true, a runAsUser other than 0, a runAsGroup, seccompProfile RuntimeDefault", psc)
	}
	if pod.HostNetwork || pod.HostPID || pod.HostIPC {
		t.Errorf("pod uses a host namespace: hostNetwork %t, hostPID %t, hostIPC %t", pod.HostNetwork, pod.HostPID, pod.HostIPC)
	}
	for _, c := range append(pod.InitContainers, pod.Containers...) {
		sc := c.SecurityContext
		if sc == nil {
			sc = &corev1.SecurityContext{}
		}
		caps := sc.Capabilities
		if caps == nil {
			caps = &corev1.Capabilities{}
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || !isTrue(sc.ReadOnlyRootFilesystem) ||
			isTrue(sc.Privileged) || !slices.Equal(caps.Drop, []corev1.Capability{"ALL"}) || len(caps.Add) > 0 {
			t.Errorf("container %s: securityContext = %+v, want allowPrivilegeEscalation false, readOnlyRootFilesystem true, "+
				"capabilities drop [ALL] and add none, not privileged", c.Name, sc)
		}
		if c.Resources.Limits.Memory().IsZero() {
			t.Errorf("container %s has no memory limit", c.Name)
		}
	}
	dockerfile, err := os.ReadFile(filepath.Join(dir, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	user := "none"
	if users := regexp.MustCompile(`(?m)^USER\s+(\S+)`).FindAllSubmatch(dockerfile, -1); len(users) > 0 {
		user = string(users[len(users)-1][1])
	}
	if psc.RunAsUser != nil && psc.RunAsGroup != nil && user != fmt.Sprintf("%d:%d", *psc.RunAsUser, *psc.RunAsGroup) {
		t.Errorf("%s/Dockerfile's last USER is %s, want %d:%d as the %s runs it", dir, user, *psc.RunAsUser, *psc.RunAsGroup, kind)
	}
}

func isTrue(b *bool) bool { return b != nil && *b }

// wantNoWildcards checks that no Role or ClusterRole in path grants "*" (any
// verb, API group, resource or URL), nor the verbs that lead past RBAC.
func wantNoWildcards(t *testing.T, path string) {
	t.Helper()
	roles := 0
	for _, doc := range documents(t, path) {
		var role struct {
			Kind     string                `json:"kind"`
			Metadata struct{ Name string } `json:"metadata"`
			Rules    []rbacv1.PolicyRule   `json:"rules"`
		}
		if err := utilyaml.Unmarshal(doc, &role); err != nil {
			t.Fatal(err)
		}
		if role.Kind != "Role" && role.Kind != "ClusterRole" {
			continue
		}
		roles++
		for i, r := range role.Rules {
			for _, s := range slices.Concat(r.Verbs, r.APIGroups, r.Resources, r.ResourceNames, r.NonResourceURLs) {
				if s == "*" || s == "escalate" || s == "bind" || s == "impersonate" {
					t.Errorf("%s %s rule %d grants %q: %+v", role.Kind, role.Metadata.Name, i+1, s, r)
				}
			}
		}
	}
	if roles == 0 {
		t.Errorf("%s holds no Role or ClusterRole", path)
	}
}

// documents returns the YAML documents of the file at path.
func documents(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		docs = append(docs, doc)
	}
}
