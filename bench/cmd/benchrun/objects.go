package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kctl-dev/kctl/internal/podfixture"
)

// fieldManager names the harness in managedFields.
const fieldManager = "benchrun"

// loadConfig reads a kubeconfig without touching its QPS (0: each stack's default).
func loadConfig(path string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
}

// harnessClient is the harness's own clientset: protobuf, no client-side limit.
func harnessClient(kubeconfig string) (*kubernetes.Clientset, error) {
	cfg, err := loadConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS = -1
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	cfg.UserAgent = "benchrun"
	return kubernetes.NewForConfig(cfg)
}

func ensureNamespace(ctx context.Context, cs kubernetes.Interface, name string) error {
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}},
		metav1.CreateOptions{FieldManager: fieldManager})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// clearNamespace deletes every Pod and ReplicaSet in ns. Unscheduled Pods go
// at once; there is no garbage collector, so nothing else is left to wait for.
func clearNamespace(ctx context.Context, cs kubernetes.Interface, ns string) error {
	zero := int64(0)
	opts := metav1.DeleteOptions{GracePeriodSeconds: &zero}
	if err := cs.CoreV1().Pods(ns).DeleteCollection(ctx, opts, metav1.ListOptions{}); err != nil {
		return err
	}
	return cs.AppsV1().ReplicaSets(ns).DeleteCollection(ctx, opts, metav1.ListOptions{})
}

// parallel runs fn(0..n-1) on workers goroutines and returns the first error.
func parallel(n, workers int, fn func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
					next.Store(int64(n))
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// replicaSet is a ReplicaSet of `replicas` Pods selected by app=<name>.
func replicaSet(ns, name string, replicas int32) *appsv1.ReplicaSet {
	sel := map[string]string{"app": name}
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": name, "team": "payments"}},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/payments/api:1.42.0"}}},
			},
		},
	}
}

// ownedPod is a realistic Pod of rs (controller owner reference, the selector's labels).
func ownedPod(rs *appsv1.ReplicaSet, name string) *corev1.Pod {
	p := realisticPod(rs.Namespace, name, rs.Name)
	t := true
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID,
		Controller: &t, BlockOwnerDeletion: &t}}
	return p
}

// realisticPod is a Pod as a Deployment of a typical service makes it: an
// app container and a proxy sidecar with env (from values, a Secret and the
// downward API), ports, resources, probes and mounts; a projected
// service-account volume, a ConfigMap and an emptyDir; tolerations, labels
// and annotations. Created with a field manager, the API server adds
// defaults and managedFields: about 4.8 KB as protobuf, two thirds of it
// managedFields (no status: there is no kubelet).
func realisticPod(ns, name, app string) *corev1.Pod {
	q := resource.MustParse
	probe := func(path string, port int32, delay int32) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(port)}},
			InitialDelaySeconds: delay, PeriodSeconds: 10, TimeoutSeconds: 2, FailureThreshold: 3}
	}
	fieldEnv := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	expiry := int64(3607)
	grace := int64(30)
	mode := int32(420)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Labels: map[string]string{"app": app, "app.kubernetes.io/name": "payments-api",
				"app.kubernetes.io/version": "1.42.0", "pod-template-hash": "7d9f8c6b5", "team": "payments"},
			Annotations: map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "9090",
				"kubectl.kubernetes.io/default-container": "app"},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.example.com/payments/api:1.42.0",
				Args:  []string{"--listen=:8080", "--config=/etc/payments/config.yaml"},
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "metrics", ContainerPort: 9090}},
				Env: []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"}, {Name: "REGION", Value: "eu-west-1"},
					fieldEnv("POD_NAME", "metadata.name"),
					{Name: "DATABASE_URL", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
						LocalObjectReference: corev1.LocalObjectReference{Name: "payments-db"}, Key: "url"}}}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("250m"), "memory": q("256Mi")},
					Limits: corev1.ResourceList{"cpu": q("1"), "memory": q("512Mi")}},
				LivenessProbe: probe("/healthz", 8080, 10), ReadinessProbe: probe("/readyz", 8080, 5),
				VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/payments", ReadOnly: true},
					{Name: "tmp", MountPath: "/tmp"},
					{Name: "kube-api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}},
				SecurityContext: &corev1.SecurityContext{RunAsNonRoot: ptr(true), ReadOnlyRootFilesystem: ptr(true)},
			}, {
				Name: "proxy", Image: "registry.example.com/mesh/proxy:1.24.3",
				Args:  []string{"proxy", "sidecar", "--concurrency=2"},
				Ports: []corev1.ContainerPort{{Name: "proxy-admin", ContainerPort: 15000}},
				Env:   []corev1.EnvVar{fieldEnv("POD_NAME", "metadata.name")},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("100m"), "memory": q("128Mi")},
					Limits: corev1.ResourceList{"cpu": q("500m"), "memory": q("256Mi")}},
				VolumeMounts: []corev1.VolumeMount{{Name: "kube-api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}},
			}},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "payments-config"}, DefaultMode: &mode}}},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr(q("1Gi"))}}},
				{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: &mode,
					Sources: []corev1.VolumeProjection{
						{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: &expiry, Path: "token"}},
						{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
							Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
					}}}},
			},
			ServiceAccountName:            "payments-api",
			TerminationGracePeriodSeconds: &grace,
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(300))},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(300))}},
		},
	}
}

func ptr[T any](v T) *T { return &v }

// createPods creates n realistic Pods name-0..name-(n-1) in ns (skipping those that exist).
func createPods(ctx context.Context, cs kubernetes.Interface, ns, prefix string, n int) error {
	return parallel(n, 16, func(i int) error {
		name := fmt.Sprintf("%s-%d", prefix, i)
		_, err := cs.CoreV1().Pods(ns).Create(ctx, realisticPod(ns, name, prefix), metav1.CreateOptions{FieldManager: fieldManager})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
}

// createVariedPods creates n Pods of internal/podfixture in ns (20 workloads
// over 50 nodes, each with its own name and token volume), then writes the
// status a kubelet would (there is none); Pods that exist are skipped. The
// prefix is not used: the fixture generates names.
func createVariedPods(ctx context.Context, cs kubernetes.Interface, ns, _ string, n int) error {
	return parallel(n, 16, func(i int) error {
		want := podfixture.Pod(ns, i)
		pod := want.DeepCopy()
		pod.UID = "" // the server's to set
		pod.ResourceVersion = ""
		pod.CreationTimestamp = metav1.Time{}
		pod.Status = corev1.PodStatus{} // Create ignores it
		created, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{FieldManager: fieldManager})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		if err != nil {
			return err
		}
		created.Status = want.Status
		_, err = cs.CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{FieldManager: "kubelet"})
		return err
	})
}

// createIdleFixture creates env.rssRS ReplicaSets rs-<i> in ns with
// env.rssPods Pods each (the idle RSS measurements' cluster), and returns
// the pod-count label podcount must write on each.
func createIdleFixture(ctx context.Context, env *env, ns string) (map[string]string, error) {
	cs := env.cs
	err := parallel(env.rssRS, 16, func(i int) error {
		rs, err := cs.AppsV1().ReplicaSets(ns).Create(ctx, replicaSet(ns, fmt.Sprintf("rs-%d", i), int32(env.rssPods)),
			metav1.CreateOptions{FieldManager: fieldManager})
		if err != nil {
			return err
		}
		for j := range env.rssPods {
			if _, err := cs.CoreV1().Pods(ns).Create(ctx, ownedPod(rs, fmt.Sprintf("%s-p%d", rs.Name, j)),
				metav1.CreateOptions{FieldManager: fieldManager}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	want := map[string]string{}
	for i := range env.rssRS {
		want[fmt.Sprintf("rs-%d", i)] = fmt.Sprint(env.rssPods)
	}
	return want, nil
}

// clearPodCounts removes the pod-count label the last controller wrote on
// the idle fixture's ReplicaSets in ns, so that every run does the same
// work.
func clearPodCounts(ctx context.Context, env *env, ns string) error {
	return parallel(env.rssRS, 16, func(i int) error {
		_, err := env.cs.AppsV1().ReplicaSets(ns).Patch(ctx, fmt.Sprintf("rs-%d", i), types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"pod-count":null}}}`), metav1.PatchOptions{FieldManager: fieldManager})
		return err
	})
}
