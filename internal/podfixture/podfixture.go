// Package podfixture makes Pods as varied as a real cluster's, for kctl's
// memory measurements (share_test.go) and benchmarks (bench/).
//
// Pod(ns, i) is the i-th Pod of a cluster of 20 workloads (Deployments of
// their own images, env, resources, probes and sidecars) spread over 50
// nodes. Each Pod has what makes real Pods differ: a generated name, its own
// kube-api-access-xxxxx projected token volume mounted in every container (the
// ServiceAccount admission plugin adds one to nearly every Pod), the defaults
// the API server adds, and a status as a kubelet writes it (host and Pod IPs,
// container IDs, start times, conditions, restart counts). The same i always
// gives the same Pod.
//
//	for i := range 10000 {
//		pod := podfixture.Pod("shop", i)
//		...
//	}
package podfixture

import (
	"fmt"
	"math/rand/v2"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Workloads and Nodes are the numbers of workloads the Pods belong to and of
// nodes they run on.
const (
	Workloads = 20
	Nodes     = 50
)

// base is when the cluster's Pods start.
var base = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// Pod returns the i-th Pod in namespace ns; it belongs to workload i % Workloads.
func Pod(ns string, i int) *corev1.Pod {
	w := workloadOf(i % Workloads)
	r := rand.New(rand.NewPCG(uint64(i), 0x5eed))
	token := "kube-api-access-" + suffix(r)
	node := r.IntN(Nodes)
	created := base.Add(time.Duration(r.IntN(30*24*3600)) * time.Second)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: w.name + "-" + w.hash + "-" + suffix(r), GenerateName: w.name + "-" + w.hash + "-",
			UID: types.UID(uuid(r)), ResourceVersion: fmt.Sprint(1000000 + i), CreationTimestamp: metav1.NewTime(created),
			Labels: map[string]string{"app.kubernetes.io/name": w.name, "app.kubernetes.io/part-of": w.team,
				"app.kubernetes.io/version": w.version, "pod-template-hash": w.hash},
			Annotations: map[string]string{"checksum/config": w.checksum, "kubectl.kubernetes.io/default-container": w.name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: w.name + "-" + w.hash,
				UID: types.UID(w.ownerUID), Controller: ptr(true), BlockOwnerDeletion: ptr(true)}},
		},
		Spec: w.spec(token, fmt.Sprintf("node-%02d", node)),
	}
	if w.metricsPort != 0 {
		pod.Annotations["prometheus.io/scrape"] = "true"
		pod.Annotations["prometheus.io/port"] = fmt.Sprint(w.metricsPort)
	}
	pod.Status = w.status(r, pod, node, i, created)
	return pod
}

// workload is what the Pods of one Deployment have in common.
type workload struct {
	name, team, version, hash, checksum, ownerUID string
	containers, initContainers                    []corev1.Container
	metricsPort                                   int32
	emptyDir                                      bool
}

func workloadOf(n int) workload {
	names := [Workloads]string{"api-gateway", "checkout", "payments", "cart", "catalog", "search", "recommendations",
		"auth", "users", "orders", "inventory", "shipping", "notifications", "email-worker", "image-resizer",
		"frontend", "admin", "reports", "metrics-exporter", "session-cache"}
	teams := []string{"platform", "commerce", "payments", "growth", "identity"}
	r := rand.New(rand.NewPCG(uint64(n), 0x3a11))
	w := workload{name: names[n], team: teams[n%len(teams)], version: fmt.Sprintf("1.%d.%d", r.IntN(40), r.IntN(10)),
		hash: suffix(r) + suffix(r)[:r.IntN(3)+3], checksum: hex(r, 64), ownerUID: uuid(r), emptyDir: n%3 == 1}
	if n%2 == 0 {
		w.metricsPort = 9090
	}
	cpu := []string{"50m", "100m", "250m", "500m", "1"}[r.IntN(5)]
	mem := []string{"64Mi", "128Mi", "256Mi", "512Mi", "1Gi"}[r.IntN(5)]
	app := corev1.Container{
		Name: w.name, Image: fmt.Sprintf("registry.example.com/%s/%s:%s", w.team, w.name, w.version),
		Args:  []string{"--listen=:8080", "--config=/etc/" + w.name + "/config.yaml"},
		Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
		Env:   env(r, w.name),
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(mem)}},
		VolumeMounts:   []corev1.VolumeMount{{Name: "config", MountPath: "/etc/" + w.name, ReadOnly: true}},
		LivenessProbe:  probe("/healthz", 8080, 10),
		ReadinessProbe: probe("/readyz", 8080, 0),
		SecurityContext: &corev1.SecurityContext{RunAsNonRoot: ptr(true), ReadOnlyRootFilesystem: ptr(true),
			AllowPrivilegeEscalation: ptr(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
	}
	if w.metricsPort != 0 {
		app.Ports = append(app.Ports, corev1.ContainerPort{Name: "metrics", ContainerPort: w.metricsPort, Protocol: corev1.ProtocolTCP})
	}
	if w.emptyDir {
		app.VolumeMounts = append(app.VolumeMounts, corev1.VolumeMount{Name: "tmp", MountPath: "/tmp"})
	}
	w.containers = []corev1.Container{app}
	if n%3 == 0 {
		w.containers = append(w.containers, corev1.Container{
			Name: "proxy", Image: "registry.example.com/mesh/proxy:1.24.3", Args: []string{"proxy", "sidecar", "--concurrency=2"},
			Ports: []corev1.ContainerPort{{Name: "proxy-admin", ContainerPort: 15000, Protocol: corev1.ProtocolTCP}},
			Env: []corev1.EnvVar{fieldEnv("POD_NAME", "metadata.name"), fieldEnv("POD_NAMESPACE", "metadata.namespace"),
				fieldEnv("INSTANCE_IP", "status.podIP"), {Name: "SERVICE_NAME", Value: w.name}},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi")}},
			ReadinessProbe: probe("/healthz/ready", 15021, 1),
		})
	}
	if n%5 == 0 {
		w.containers = append(w.containers, corev1.Container{
			Name: "log-shipper", Image: "registry.example.com/platform/fluent-bit:3.1.4",
			Env: []corev1.EnvVar{{Name: "OUTPUT", Value: "loki"}, {Name: "SERVICE", Value: w.name}},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("20m"), corev1.ResourceMemory: resource.MustParse("32Mi")}},
		})
	}
	if n%4 == 0 {
		w.initContainers = []corev1.Container{{
			Name: "migrate", Image: app.Image, Args: []string{"migrate", "--wait"}, Env: app.Env[:2],
			Resources: app.Resources,
		}}
	}
	return w
}

// spec is the workload's Pod spec with the defaults the API server adds,
// the Pod's own token volume mounted in every container, on node.
func (w workload) spec(token, node string) corev1.PodSpec {
	mount := corev1.VolumeMount{Name: token, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}
	containers := func(in []corev1.Container) []corev1.Container {
		var out []corev1.Container
		for _, c := range in {
			c.VolumeMounts = append(append([]corev1.VolumeMount(nil), c.VolumeMounts...), mount)
			c.TerminationMessagePath = corev1.TerminationMessagePathDefault
			c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
			c.ImagePullPolicy = corev1.PullIfNotPresent
			out = append(out, c)
		}
		return out
	}
	volumes := []corev1.Volume{
		{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: w.name + "-config"}, DefaultMode: ptr(int32(420))}}},
		{Name: token, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: ptr(int32(420)),
			Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: ptr(int64(3607)), Path: "token"}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
					Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
				{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
					FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
			}}}},
	}
	if w.emptyDir {
		volumes = append(volumes, corev1.Volume{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	return corev1.PodSpec{
		InitContainers: containers(w.initContainers), Containers: containers(w.containers), Volumes: volumes,
		NodeName: node, ServiceAccountName: w.name, DeprecatedServiceAccount: w.name,
		RestartPolicy: corev1.RestartPolicyAlways, DNSPolicy: corev1.DNSClusterFirst, SchedulerName: corev1.DefaultSchedulerName,
		SecurityContext: &corev1.PodSecurityContext{FSGroup: ptr(int64(2000))}, TerminationGracePeriodSeconds: ptr(int64(30)),
		EnableServiceLinks: ptr(true), Priority: ptr(int32(0)), PreemptionPolicy: ptr(corev1.PreemptLowerPriority),
		Tolerations: []corev1.Toleration{
			{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(300))},
			{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(300))}},
	}
}

// status is a running Pod's status as the kubelet on node writes it.
func (w workload) status(r *rand.Rand, pod *corev1.Pod, node, i int, created time.Time) corev1.PodStatus {
	at := func(seconds int) metav1.Time {
		return metav1.NewTime(created.Add(time.Duration(seconds) * time.Second))
	}
	hostIP := fmt.Sprintf("10.0.%d.%d", node/200, 10+node%200)
	podIP := fmt.Sprintf("10.%d.%d.%d", 64+node, (i/250)%250, 2+i%250)
	ready := 3 + r.IntN(60)
	st := corev1.PodStatus{
		Phase: corev1.PodRunning, HostIP: hostIP, HostIPs: []corev1.HostIP{{IP: hostIP}},
		PodIP: podIP, PodIPs: []corev1.PodIP{{IP: podIP}}, StartTime: ptr(at(1)), QOSClass: corev1.PodQOSBurstable,
		Conditions: []corev1.PodCondition{
			{Type: "PodReadyToStartContainers", Status: corev1.ConditionTrue, LastTransitionTime: at(2)},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: at(2 + len(w.initContainers)*5)},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: at(ready)},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: at(ready)},
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: at(0)}},
	}
	for _, c := range pod.Spec.InitContainers {
		st.InitContainerStatuses = append(st.InitContainerStatuses, corev1.ContainerStatus{Name: c.Name, Ready: true,
			Image: c.Image, ImageID: imageID(c.Image), ContainerID: "containerd://" + hex(r, 64),
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed",
				StartedAt: at(2), FinishedAt: at(6), ContainerID: "containerd://" + hex(r, 64)}}})
	}
	for _, c := range pod.Spec.Containers {
		cs := corev1.ContainerStatus{Name: c.Name, Ready: true, Started: ptr(true), Image: c.Image, ImageID: imageID(c.Image),
			ContainerID: "containerd://" + hex(r, 64),
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at(ready - 1)}}}
		if r.IntN(10) == 0 {
			cs.RestartCount = int32(1 + r.IntN(5))
			cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137,
				Reason: "OOMKilled", StartedAt: at(2), FinishedAt: at(ready - 2), ContainerID: "containerd://" + hex(r, 64)}}
		}
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}
	return st
}

// imageID is the digest the node resolved image to, the same on every node.
func imageID(image string) string {
	var h uint64 = 14695981039346656037
	for _, b := range []byte(image) {
		h = (h ^ uint64(b)) * 1099511628211
	}
	return image + "@sha256:" + hex(rand.New(rand.NewPCG(h, 0)), 64)
}

func env(r *rand.Rand, name string) []corev1.EnvVar {
	vars := []corev1.EnvVar{{Name: "LOG_LEVEL", Value: []string{"info", "debug", "warn"}[r.IntN(3)]},
		{Name: "SERVICE_NAME", Value: name}, fieldEnv("POD_NAME", "metadata.name"), fieldEnv("POD_IP", "status.podIP"),
		{Name: "DATABASE_URL", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: name + "-db"}, Key: "url"}}}}
	for k := range r.IntN(10) {
		vars = append(vars, corev1.EnvVar{Name: fmt.Sprintf("FEATURE_%d", k), Value: fmt.Sprint(r.IntN(2) == 0)})
	}
	return vars
}

func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path}}}
}

func probe(path string, port int32, delay int32) *corev1.Probe {
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(port),
		Scheme: corev1.URISchemeHTTP}}, InitialDelaySeconds: delay, TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3}
}

// suffix is a random name suffix as the API server generates it.
func suffix(r *rand.Rand) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, 5)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b)
}

func hex(r *rand.Rand, n int) string {
	const digits = "0123456789abcdef"
	b := make([]byte, n)
	for i := range b {
		b[i] = digits[r.IntN(16)]
	}
	return string(b)
}

func uuid(r *rand.Rand) string {
	h := hex(r, 32)
	return h[:8] + "-" + h[8:12] + "-4" + h[13:16] + "-8" + h[17:20] + "-" + h[20:]
}

func ptr[T any](v T) *T { return &v }
