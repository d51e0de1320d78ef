package kctl

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/kctl-dev/kctl/internal/podfixture"
	"github.com/kctl-dev/kctl/internal/protowire"
	"github.com/kctl-dev/kctl/internal/transport"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
)

// gizmo is a declared (custom) type: it travels as JSON.
type gizmo struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              gizmoSpec   `json:"spec,omitempty"`
	Status            gizmoStatus `json:"status,omitempty"`
}

type gizmoSpec struct {
	Size  int      `json:"size,omitempty"`
	Color string   `json:"color,omitempty"`
	Tags  []string `json:"tags,omitempty"`
}

type gizmoStatus struct {
	Ready bool `json:"ready,omitempty"`
}

var gizmos = Declare[gizmo](Resource{Group: "kctl.example.com", Version: "v1", Kind: "Gizmo", Namespaced: true})

// mediaProtobuf is the media type of built-in types' protobuf.
const mediaProtobuf = protowire.Media

// protoObject is implemented by *T for every k8s.io/api type T.
type protoObject = protowire.Message

func podCodec() codec[*corev1.Pod] {
	res, _ := ResourceOf[corev1.Pod]()
	return newCodec(opsOf[corev1.Pod](), res, true)
}

func gizmoCodec() codec[*gizmo] { return newCodec(opsOf[gizmo](), gizmos, false) }

// realisticPod is a pod as a Deployment's ReplicaSet makes it, scheduled and running.
func realisticPod(i int) *corev1.Pod {
	name := fmt.Sprintf("web-7d4b9c6f5-%05d", i)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "shop", UID: types.UID(fmt.Sprintf("3f2a1b4c-0000-4000-8000-%012d", i)),
			ResourceVersion: fmt.Sprint(100000 + i), GenerateName: "web-7d4b9c6f5-",
			CreationTimestamp: metav1.Unix(1700000000, 0),
			Labels:            map[string]string{"app": "web", "pod-template-hash": "7d4b9c6f5", "tier": "frontend"},
			Annotations:       map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "9090"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d4b9c6f5",
				UID: "9b1e0c1d-1111-4000-8000-000000000001", Controller: new(true), BlockOwnerDeletion: new(true)}},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kube-controller-manager", Operation: "Update", APIVersion: "v1", Time: new(metav1.Unix(1700000000, 0)),
					FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(specFields)}},
				{Manager: "kubelet", Operation: "Update", APIVersion: "v1", Time: new(metav1.Unix(1700000010, 0)),
					FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(statusFields)}, Subresource: "status"}},
		},
		Spec: corev1.PodSpec{ // with the defaults the API server adds
			NodeName: fmt.Sprintf("node-%d", i%20), ServiceAccountName: "web", DeprecatedServiceAccount: "web", RestartPolicy: corev1.RestartPolicyAlways,
			DNSPolicy: corev1.DNSClusterFirst, SchedulerName: "default-scheduler", SecurityContext: &corev1.PodSecurityContext{},
			TerminationGracePeriodSeconds: new(int64(30)), EnableServiceLinks: new(true), Priority: new(int32(0)),
			PreemptionPolicy: new(corev1.PreemptLowerPriority),
			Containers: []corev1.Container{{
				Name: "web", Image: "registry.example.com/shop/web:1.24.3", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: "TCP"}},
				Env: []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"}, {Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}}},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")}},
				VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/web"}, {Name: "kube-api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080), Scheme: "HTTP"}},
					PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3},
				TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: "File", ImagePullPolicy: "IfNotPresent",
			}},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "web-config"}, DefaultMode: new(int32(420))}}},
				{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: new(int32(420)), Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: new(int64(3607)), Path: "token"}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
					{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}}}}}}},
			Tolerations: []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: new(int64(300))},
				{Key: "node.kubernetes.io/unreachable", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: new(int64(300))}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, HostIP: "10.0.3.7", HostIPs: []corev1.HostIP{{IP: "10.0.3.7"}}, QOSClass: corev1.PodQOSBurstable,
			PodIP: fmt.Sprintf("10.244.%d.%d", i/250, i%250), PodIPs: []corev1.PodIP{{IP: fmt.Sprintf("10.244.%d.%d", i/250, i%250)}},
			StartTime: new(metav1.Unix(1700000001, 0)),
			Conditions: []corev1.PodCondition{{Type: "PodReadyToStartContainers", Status: "True", LastTransitionTime: metav1.Unix(1700000004, 0)},
				{Type: corev1.PodInitialized, Status: "True", LastTransitionTime: metav1.Unix(1700000001, 0)},
				{Type: corev1.PodReady, Status: "True", LastTransitionTime: metav1.Unix(1700000010, 0)},
				{Type: corev1.ContainersReady, Status: "True", LastTransitionTime: metav1.Unix(1700000010, 0)},
				{Type: corev1.PodScheduled, Status: "True", LastTransitionTime: metav1.Unix(1700000000, 0)}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "web", Ready: true, Started: new(true), Image: "registry.example.com/shop/web:1.24.3",
				ImageID: "registry.example.com/shop/web@sha256:4f1c0de5aa11", ContainerID: "containerd://abc123",
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Unix(1700000005, 0)}}}},
		},
	}
}

// specFields and statusFields are managedFields as the API server records
// them for a ReplicaSet's pod: about half of the pod's protobuf, as in a real cluster.
const (
	specFields = `{"f:metadata":{"f:annotations":{".":{},"f:prometheus.io/port":{},"f:prometheus.io/scrape":{}},"f:generateName":{},` +
		`"f:labels":{".":{},"f:app":{},"f:pod-template-hash":{},"f:tier":{}},"f:ownerReferences":{".":{},` +
		`"k:{\"uid\":\"9b1e0c1d-1111-4000-8000-000000000001\"}":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{".":{},` +
		`"f:env":{".":{},"k:{\"name\":\"LOG_LEVEL\"}":{".":{},"f:name":{},"f:value":{}},"k:{\"name\":\"POD_NAME\"}":{".":{},"f:name":{},` +
		`"f:valueFrom":{".":{},"f:fieldRef":{}}}},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:ports":{".":{},` +
		`"k:{\"containerPort\":8080,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:name":{},"f:protocol":{}}},` +
		`"f:readinessProbe":{".":{},"f:failureThreshold":{},"f:httpGet":{".":{},"f:path":{},"f:port":{},"f:scheme":{}},` +
		`"f:periodSeconds":{},"f:successThreshold":{},"f:timeoutSeconds":{}},"f:resources":{".":{},"f:limits":{".":{},"f:memory":{}},` +
		`"f:requests":{".":{},"f:cpu":{},"f:memory":{}}},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{},` +
		`"f:volumeMounts":{".":{},"k:{\"mountPath\":\"/etc/web\"}":{".":{},"f:mountPath":{},"f:name":{}}}}},"f:dnsPolicy":{},` +
		`"f:enableServiceLinks":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"f:serviceAccount":{},` +
		`"f:serviceAccountName":{},"f:terminationGracePeriodSeconds":{},"f:tolerations":{},"f:volumes":{".":{},` +
		`"k:{\"name\":\"config\"}":{".":{},"f:configMap":{".":{},"f:defaultMode":{},"f:name":{}},"f:name":{}}}}}`
	statusFields = `{"f:status":{"f:conditions":{"k:{\"type\":\"ContainersReady\"}":{".":{},"f:lastProbeTime":{},` +
		`"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Initialized\"}":{".":{},"f:lastProbeTime":{},` +
		`"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"PodReadyToStartContainers\"}":{".":{},` +
		`"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Ready\"}":{".":{},` +
		`"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}},"f:containerStatuses":{},"f:hostIP":{},` +
		`"f:hostIPs":{},"f:phase":{},"f:podIP":{},"f:podIPs":{".":{},"k:{\"ip\":\"10.244.0.1\"}":{".":{},"f:ip":{}}},"f:startTime":{}}}`
)

// envelope wraps raw protobuf as the API server does.
func envelope(kind string, raw []byte) []byte {
	u := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: "v1", Kind: kind}, Raw: raw}
	b, err := u.Marshal()
	if err != nil {
		panic(err)
	}
	return append([]byte("k8s\x00"), b...)
}

func podListBodies(n int) (proto, js []byte) {
	list := &corev1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}, ListMeta: metav1.ListMeta{ResourceVersion: "4242", Continue: "next"}}
	for i := range n {
		list.Items = append(list.Items, *realisticPod(i))
	}
	raw, err := list.Marshal()
	if err != nil {
		panic(err)
	}
	js, err = json.Marshal(list)
	if err != nil {
		panic(err)
	}
	return envelope("PodList", raw), js
}

// watchFrame is one protobuf watch frame as the API server sends it.
func watchFrame(typ string, object []byte) []byte {
	ev := metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: object}}
	b, err := ev.Marshal()
	if err != nil {
		panic(err)
	}
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

func podProto(p *corev1.Pod) []byte {
	raw, err := p.Marshal()
	if err != nil {
		panic(err)
	}
	return envelope("Pod", raw)
}

func statusProto(st *metav1.Status) []byte {
	raw, err := st.Marshal()
	if err != nil {
		panic(err)
	}
	return envelope("Status", raw)
}

func TestCodec_Protobuf_ObjectRoundTrip_KeepsFieldsAndSetsTypeMeta(t *testing.T) {
	c := podCodec()
	in := realisticPod(1)
	body, ct, err := c.encode(in)
	if err != nil || ct != mediaProtobuf || !bytes.HasPrefix(body, protowire.Magic) {
		t.Fatalf("encode = %d bytes, %q, %v; want an enveloped protobuf body", len(body), ct, err)
	}
	out, err := c.decode(mediaProtobuf, body)
	if err != nil {
		t.Fatal(err)
	}
	if out.APIVersion != "v1" || out.Kind != "Pod" || out.Name != in.Name || out.Status.PodIP != in.Status.PodIP {
		t.Errorf("decode(encode(pod)) = %s %s %s %s, want v1 Pod %s %s", out.APIVersion, out.Kind, out.Name, out.Status.PodIP, in.Name, in.Status.PodIP)
	}
}

func TestCodec_ListProtobufAndJSON_DecodeTheSameObjects(t *testing.T) {
	pb, js := podListBodies(3)
	c := podCodec()
	for _, tc := range []struct {
		ct   string
		body []byte
	}{{mediaProtobuf, pb}, {mediaJSON, js}} {
		items, meta, skipped, err := c.decodeList(tc.ct, tc.body)
		if err != nil || skipped != nil {
			t.Fatalf("decodeList(%s): %v, skipped %v", tc.ct, err, skipped)
		}
		if len(items) != 3 || meta.ResourceVersion != "4242" || meta.Continue != "next" {
			t.Fatalf("decodeList(%s) = %d items, %+v; want 3 items, rv 4242, continue next", tc.ct, len(items), meta)
		}
		for i, p := range items {
			if p.Name != realisticPod(i).Name || p.Kind != "Pod" || p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue() != 250 {
				t.Errorf("decodeList(%s)[%d] = %s %s, want %s", tc.ct, i, p.Kind, p.Name, realisticPod(i).Name)
			}
		}
		if &items[0].Spec == &items[1].Spec {
			t.Error("items share memory; want individually allocated objects")
		}
	}
}

func TestCodec_ListWithABadItem_SkipsItAndNamesIt(t *testing.T) {
	js := `{"metadata":{"resourceVersion":"7"},"items":[{"metadata":{"name":"good"}},` +
		`{"metadata":{"name":"bad","namespace":"ns"},"spec":{"size":"big"}},{"metadata":{"name":"good2"}}]}`
	items, meta, skipped, err := gizmoCodec().decodeList(mediaJSON, []byte(js))
	if err != nil || len(items) != 2 || items[0].Name != "good" || items[1].Name != "good2" || items[1].Kind != "Gizmo" || meta.ResourceVersion != "7" {
		t.Errorf("decodeList(JSON with a bad item) = %d items, rv %q, %v; want good and good2 at rv 7", len(items), meta.ResourceVersion, err)
	}
	if len(skipped) != 1 || !strings.Contains(skipped[0].Error(), "ns/bad") {
		t.Errorf("skipped = %v, want one error naming ns/bad", skipped)
	}
	// A protobuf item whose ObjectMeta is readable but whose spec is garbage, between two good ones.
	bad := badPodProto("shop", "broken")
	good := func(i int) []byte { raw, _ := realisticPod(i).Marshal(); return raw }
	list := slices.Concat(pbField(1, nil), pbField(2, good(0)), pbField(2, bad), pbField(2, good(2)))
	for _, skip := range []bool{false, true} {
		c := podCodec()
		c.wire.SkipManagedFields = skip
		pods, _, skipped, err := c.decodeList(mediaProtobuf, envelope("PodList", list))
		if err != nil || len(pods) != 2 || pods[0].Name != realisticPod(0).Name || pods[1].Name != realisticPod(2).Name {
			t.Errorf("skipManagedFields=%v: decodeList(protobuf with a bad item) = %d items, %v; want pods 0 and 2", skip, len(pods), err)
		}
		if len(skipped) != 1 || !strings.Contains(skipped[0].Error(), "pods/v1 shop/broken") {
			t.Errorf("skipManagedFields=%v: skipped = %v, want one error naming shop/broken", skip, skipped)
		}
	}
	// A list whose own structure is broken is an error, not a skip.
	if _, _, _, err := podCodec().decodeList(mediaProtobuf, envelope("PodList", list[:len(list)-3])); err == nil {
		t.Error("decodeList(truncated protobuf list): no error")
	}
}

// badPodProto is a pod's protobuf (no envelope) with a readable name and a garbage spec.
func badPodProto(namespace, name string) []byte {
	meta, _ := (&metav1.ObjectMeta{Name: name, Namespace: namespace}).Marshal()
	return append(pbField(1, meta), pbField(2, []byte{0xff, 0xff})...)
}

func TestCodec_SkipManagedFields_DecodesEverythingElse(t *testing.T) {
	want := realisticPod(3)
	raw, _ := want.Marshal()
	// The same pod with its metadata split in two around managedFields and
	// managedFields first: protobuf merges repeated fields, so it is the same pod.
	noMF := realisticPod(3)
	noMF.ManagedFields = nil
	metaOnly, _ := noMF.ObjectMeta.Marshal()
	mfOnly, _ := (&metav1.ObjectMeta{ManagedFields: want.ManagedFields}).Marshal()
	spec, _ := want.Spec.Marshal()
	status, _ := want.Status.Marshal()
	_, _, _, rest, _ := protowire.Next(metaOnly)
	_, _, _, rest, _ = protowire.Next(rest)
	cut := len(metaOnly) - len(rest) // after the first two fields
	shuffled := slices.Concat(pbField(1, mfOnly), pbField(2, spec), pbField(1, slices.Concat(metaOnly[:cut], mfOnly)),
		pbField(3, status), pbField(1, metaOnly[cut:]))
	for _, body := range [][]byte{raw, shuffled} {
		c := podCodec()
		full, err := c.decodeItem(body, true)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(full.ManagedFields); n != 2 && n != 4 {
			t.Fatalf("decodeItem decoded %d managedFields, want 2 (4 when split)", n)
		}
		c.wire.SkipManagedFields = true
		got, err := c.decodeItem(body, true)
		if err != nil {
			t.Fatal(err)
		}
		full.ManagedFields = nil
		if got.ManagedFields != nil || !reflect.DeepEqual(got, full) {
			t.Errorf("with skipManagedFields:\n got %+v\nwant %+v", got, full)
		}
	}
}

func TestCodec_DecodedObjectsDoNotAliasTheBody(t *testing.T) {
	pb, js := podListBodies(3)
	for _, tc := range []struct {
		ct   string
		body []byte
		skip bool
	}{{mediaProtobuf, pb, false}, {mediaProtobuf, pb, true}, {mediaJSON, js, false}} {
		c := podCodec()
		c.wire.SkipManagedFields = tc.skip
		body := bytes.Clone(tc.body)
		items, _, _, err := c.decodeList(tc.ct, body)
		want, _, _, _ := c.decodeList(tc.ct, tc.body)
		for i := range body {
			body[i] = 'x' // as the next answer read into the pooled buffer would
		}
		if err != nil || !reflect.DeepEqual(items, want) {
			t.Errorf("%s (skipManagedFields=%v): objects changed when the body was overwritten", tc.ct, tc.skip)
		}
	}
	frames := slices.Concat(watchFrame("ADDED", podProto(realisticPod(1))), watchFrame("MODIFIED", podProto(realisticPod(2))))
	evs, _ := readEvents(newWatchStream(podCodec(), mediaProtobuf, io.NopCloser(bytes.NewReader(frames))))
	if len(evs) != 2 || evs[0].Object.Name != realisticPod(1).Name || string(evs[0].Object.ManagedFields[0].FieldsV1.Raw) != specFields {
		t.Errorf("the first watch event changed when the second was read into the frame buffer")
	}
}

// pbField is one length-delimited protobuf field.
func pbField(field int, b []byte) []byte {
	out := binary.AppendUvarint(nil, uint64(field<<3|2))
	return append(binary.AppendUvarint(out, uint64(len(b))), b...)
}

// typeOps does T's own work for the pointer-shaped core: a new zero T,
// *dst = *src, a copy that shares nothing, and T's name.
func TestOpsOf_DoesTsOwnWork(t *testing.T) {
	ops := opsOf[gizmo]()
	fresh := ops.newObject()
	if fresh == nil || fresh.Name != "" {
		t.Fatalf("newObject() = %+v, want a new zero gizmo", fresh)
	}
	src := &gizmo{Spec: gizmoSpec{Tags: []string{"a"}}}
	src.Name = "g"
	ops.set(fresh, src)
	if fresh.Name != "g" || fresh == src {
		t.Errorf("set: got %+v, want a copy of %+v", fresh, src)
	}
	copied := ops.deepCopy(src)
	copied.Spec.Tags[0] = "b"
	if src.Spec.Tags[0] != "a" {
		t.Error("deepCopy shares the tags with the original")
	}
	if ops.name != "kctl.gizmo" {
		t.Errorf("name = %q, want kctl.gizmo", ops.name)
	}
	if !isNil((*gizmo)(nil)) || isNil(src) {
		t.Error("isNil does not tell a nil *gizmo from another")
	}
}

// sameLimits says whether a's and b's first containers hold the same
// limits map, not just equal ones.
func sameLimits(a, b *corev1.Pod) bool {
	la := a.Spec.Containers[0].Resources.Limits
	lb := b.Spec.Containers[0].Resources.Limits
	return reflect.ValueOf(la).Pointer() == reflect.ValueOf(lb).Pointer()
}

// twoOfAWorkload returns two podfixture Pods of one workload: their
// containers' resources are equal.
func twoOfAWorkload(t *testing.T) (*corev1.Pod, *corev1.Pod) {
	t.Helper()
	a := podfixture.Pod("shop", 0)
	b := podfixture.Pod("shop", podfixture.Workloads)
	ra := a.Spec.Containers[0].Resources
	rb := b.Spec.Containers[0].Resources
	if len(ra.Limits) == 0 || !reflect.DeepEqual(ra, rb) {
		t.Fatalf("fixture: resources %v and %v, want equal limits", ra, rb)
	}
	return a, b
}

func podListBody(t *testing.T, pods ...*corev1.Pod) []byte {
	t.Helper()
	list := &corev1.PodList{}
	for _, p := range pods {
		list.Items = append(list.Items, *p)
	}
	raw, err := list.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return envelope("PodList", raw)
}

func TestCodec_InformersList_SharesEqualResourcesAndDecodesAsAClient(t *testing.T) {
	a, b := twoOfAWorkload(t)
	body := podListBody(t, a, b)
	client := podCodec()
	informer := podCodec()
	informer.wire.Reuse = true
	mine, _, _, err := client.decodeList(mediaProtobuf, body)
	if err != nil {
		t.Fatal(err)
	}
	shared, _, _, err := informer.decodeList(mediaProtobuf, body)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(shared, mine) {
		t.Fatal("the informer's list decodes otherwise than the client's")
	}
	if !sameLimits(shared[0], shared[1]) {
		t.Error("the informer's Pods hold two equal limits maps, want one")
	}
	if sameLimits(mine[0], mine[1]) {
		t.Error("a client's Pods share a map: a caller changing one changes the other")
	}
}

func TestWatchStream_Informers_SharesEqualResourcesOnlyUntilTheFirstBookmark(t *testing.T) {
	a, b := twoOfAWorkload(t)
	mark := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "7"}}
	var stream []byte
	for _, ev := range []struct {
		typ string
		pod *corev1.Pod
	}{{"ADDED", a}, {"ADDED", b}, {"BOOKMARK", mark}, {"MODIFIED", b}} {
		stream = append(stream, watchFrame(ev.typ, podProto(ev.pod))...)
	}
	c := podCodec()
	c.wire.Reuse = true
	w := newWatchStream(c, mediaProtobuf, io.NopCloser(bytes.NewReader(stream)))
	var pods []*corev1.Pod
	for range 4 {
		ev, err := w.Next()
		if err != nil || ev.Err != nil {
			t.Fatal(err, ev.Err)
		}
		pods = append(pods, ev.Object)
	}
	if !reflect.DeepEqual(pods[3].Spec, b.Spec) {
		t.Fatal("the Pod after the bookmark decodes otherwise")
	}
	if !sameLimits(pods[0], pods[1]) {
		t.Error("the Pods before the bookmark hold two equal limits maps, want one")
	}
	if sameLimits(pods[1], pods[3]) {
		t.Error("a Pod after the bookmark shares a map decoded before it")
	}
}

// A transform owns each object it is given (TransformFor), so an
// informer with one decodes every object's maps its own: the transform
// changing one Pod's limits leaves its workload's other Pod's alone.
func TestCache_TransformFor_ChangesOnlyTheObjectItIsGiven(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	conn := testProbeConn(t, cfg)
	a, b := twoOfAWorkload(t)
	pods := NewClient[corev1.Pod](conn)
	for _, p := range []*corev1.Pod{a, b} {
		p.Namespace = ns
		p.ResourceVersion = ""
		p.UID = ""
		if err := pods.Create(t.Context(), p); err != nil {
			t.Fatal(err)
		}
	}
	c := NewCache(conn, CacheOptions{Logger: slog.New(slog.DiscardHandler)})
	if err := ScopeFor[corev1.Pod](c, Scope{Namespaces: []string{ns}}); err != nil {
		t.Fatal(err)
	}
	err := TransformFor[corev1.Pod](c, func(p *corev1.Pod) {
		if p.Name == a.Name {
			clear(p.Spec.Containers[0].Resources.Limits)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	inf, err := InformerFor[corev1.Pod](c)
	if err != nil {
		t.Fatal(err)
	}
	startCache(t, c)
	eventually(t, "the sync", inf.HasSynced)
	got, ok := inf.Get(ns, b.Name)
	if !ok {
		t.Fatalf("%s is not cached", b.Name)
	}
	limits := got.Spec.Containers[0].Resources.Limits
	want := b.Spec.Containers[0].Resources.Limits
	if !reflect.DeepEqual(limits, want) {
		t.Errorf("%s's limits are %v after the transform changed %s's, want %v", b.Name, limits, a.Name, want)
	}
}

// Fuzz targets: whatever the server sends, the decoders return an error or
// objects, and never panic. Seeds are in testdata/fuzz.

func FuzzDecodeProtobufList(f *testing.F) {
	pb, _ := podListBodies(2)
	f.Add(pb)
	c := podCodec()
	f.Fuzz(func(t *testing.T, body []byte) {
		items, _, _, err := c.decodeList(mediaProtobuf, body)
		if err == nil {
			for _, p := range items {
				if p == nil {
					t.Fatal("nil item without an error")
				}
			}
		}
		_, _ = c.decode(mediaProtobuf, body)
		_, _ = transport.DecodeStatus(mediaProtobuf, body)
	})
}

// FuzzSkipManagedFields checks that skipping managedFields decodes whatever
// a full decode does, less the managedFields.
func FuzzSkipManagedFields(f *testing.F) {
	f.Add(rawPodForFuzz(1))
	full, skip := podCodec(), podCodec()
	skip.wire.SkipManagedFields = true
	f.Fuzz(func(t *testing.T, raw []byte) {
		want, err := full.decodeItem(raw, true)
		got, skipErr := skip.decodeItem(raw, true)
		if err != nil {
			return // skipping may decode what a full decode cannot: broken managedFields
		}
		if want.ManagedFields = nil; skipErr != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("skipping managedFields: %v\n got %+v\nwant %+v", skipErr, got, want)
		}
	})
}

func rawPodForFuzz(i int) []byte { raw, _ := realisticPod(i).Marshal(); return raw }

func FuzzDecodeJSONList(f *testing.F) {
	f.Add([]byte(`{"metadata":{"resourceVersion":"1"},"items":[{"metadata":{"name":"a"},"spec":{"size":1}}]}`))
	f.Add([]byte(`{"metadata":{},"items":[{"metadata":{"name":"a"},"spec":{"size":"x"}},null,{"metadata":{"name":"b"}}]}`))
	c := gizmoCodec()
	f.Fuzz(func(t *testing.T, body []byte) {
		items, meta, skipped, err := c.decodeList(mediaJSON, body)
		wantItems, wantMeta, wantSkipped, wantErr := decodeJSONListByHand(body)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("decodeList error = %v, encoding/json's = %v", err, wantErr)
		}
		if err != nil {
			return
		}
		if len(skipped) != wantSkipped {
			t.Fatalf("decodeList skipped %d items, encoding/json fails on %d", len(skipped), wantSkipped)
		}
		if !reflect.DeepEqual(meta, wantMeta) {
			t.Fatalf("decodeList metadata = %+v, encoding/json's = %+v", meta, wantMeta)
		}
		for _, obj := range items {
			c.setTypeMeta(obj) // what decodeList must have set too
		}
		for _, obj := range wantItems {
			c.setTypeMeta(obj)
		}
		if len(items) != len(wantItems) {
			t.Fatalf("decodeList gave %d items, encoding/json %d", len(items), len(wantItems))
		}
		for i := range items {
			if !reflect.DeepEqual(items[i], wantItems[i]) {
				t.Fatalf("item %d: decodeList = %+v, encoding/json = %+v", i, items[i], wantItems[i])
			}
		}
		_, _ = c.decode(mediaJSON, body)
		_, _ = transport.DecodeStatus(mediaJSON, body)
	})
}

// decodeJSONListByHand is what decodeList must return for a JSON list, by
// encoding/json alone: the list's metadata and each item that decodes into
// a gizmo on its own, in order, with the number of items that do not.
func decodeJSONListByHand(body []byte) (items []*gizmo, meta metav1.ListMeta, skipped int, err error) {
	var list struct {
		Metadata metav1.ListMeta   `json:"metadata"`
		Items    []json.RawMessage `json:"items"`
	}
	err = json.Unmarshal(body, &list)
	if err != nil {
		return nil, metav1.ListMeta{}, 0, err
	}
	for _, raw := range list.Items {
		obj := new(gizmo)
		itemErr := json.Unmarshal(raw, obj)
		if itemErr != nil {
			skipped++
			continue
		}
		items = append(items, obj)
	}
	return items, list.Metadata, skipped, nil
}

func FuzzDecodeProtobufWatch(f *testing.F) {
	f.Add(append(watchFrame("ADDED", podProto(realisticPod(1))), watchFrame("ERROR", statusProto(&metav1.Status{Code: 410}))...))
	c := podCodec()
	f.Fuzz(func(t *testing.T, stream []byte) {
		w := newWatchStream(c, mediaProtobuf, io.NopCloser(bytes.NewReader(stream)))
		for range 1000 {
			ev, err := w.Next()
			if err != nil {
				return
			}
			if ev.Err == nil && ev.Object == nil && ev.Status == nil {
				t.Fatalf("event %s has neither object, status nor error", ev.Type)
			}
		}
	})
}

func FuzzDecodeJSONWatch(f *testing.F) {
	f.Add([]byte(`{"type":"ADDED","object":{"metadata":{"name":"a"}}}{"type":"ERROR","object":{"kind":"Status","code":410}}`))
	c := gizmoCodec()
	f.Fuzz(func(t *testing.T, stream []byte) {
		w := newWatchStream(c, mediaJSON, io.NopCloser(bytes.NewReader(stream)))
		for range 1000 {
			ev, err := w.Next()
			if err != nil {
				return
			}
			if ev.Err == nil && ev.Object == nil && ev.Status == nil {
				t.Fatalf("event %s has neither object, status nor error", ev.Type)
			}
		}
	})
}

// BenchmarkDecodePodList compares decoding a page of 500 realistic pods from
// protobuf (with managedFields, skipping them, and as the cache does: skipping
// them, equal maps decoded once) and from JSON (the same page, as the API
// server sends either).
func BenchmarkDecodePodList(b *testing.B) {
	pb, js := podListBodies(500)
	for _, bc := range []struct {
		name, ct string
		body     []byte
		skip     bool
		reuse    bool
	}{
		{"protobuf", mediaProtobuf, pb, false, false},
		{"protobuf-skipManagedFields", mediaProtobuf, pb, true, false},
		{"protobuf-cache", mediaProtobuf, pb, true, true},
		{"json", mediaJSON, js, false, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := podCodec()
			c.wire.SkipManagedFields = bc.skip
			c.wire.Reuse = bc.reuse
			b.SetBytes(int64(len(bc.body)))
			b.ReportAllocs()
			for b.Loop() {
				if items, _, _, err := c.decodeList(bc.ct, bc.body); err != nil || len(items) != 500 {
					b.Fatal(len(items), err)
				}
			}
		})
	}
}

// BenchmarkDecodePodWatch decodes 500 MODIFIED events of realistic pods,
// with managedFields, skipping them, and as the cache does (skipping them,
// equal maps decoded once until the first bookmark).
func BenchmarkDecodePodWatch(b *testing.B) {
	var stream []byte
	for i := range 500 {
		stream = append(stream, watchFrame("MODIFIED", podProto(realisticPod(i)))...)
	}
	for _, bc := range []struct {
		name        string
		skip, reuse bool
	}{
		{"protobuf", false, false},
		{"protobuf-skipManagedFields", true, false},
		{"protobuf-cache", true, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := podCodec()
			c.wire.SkipManagedFields = bc.skip
			c.wire.Reuse = bc.reuse
			b.SetBytes(int64(len(stream)))
			b.ReportAllocs()
			for b.Loop() {
				w := newWatchStream(c, mediaProtobuf, io.NopCloser(bytes.NewReader(stream)))
				for range 500 {
					if ev, err := w.Next(); err != nil || ev.Err != nil {
						b.Fatal(err, ev.Err)
					}
				}
			}
		})
	}
}

// BenchmarkListPods is one List of a page of 500 realistic pods from an
// httptest server, as protobuf without a Content-Length (as the API server
// streams lists): reading the body and decoding it, as a Client does and as
// the cache does (skipping managedFields).
func BenchmarkListPods(b *testing.B) {
	list := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "4242"}}
	for i := range 500 {
		list.Items = append(list.Items, *realisticPod(i))
	}
	raw, _ := list.Marshal()
	pb := envelope("PodList", raw)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", mediaProtobuf)
		w.Write(pb)
	}))
	defer srv.Close()
	conn, err := NewConn(&rest.Config{Host: srv.URL, QPS: -1})
	if err != nil {
		b.Fatal(err)
	}
	for _, skip := range []bool{false, true} {
		b.Run(map[bool]string{false: "client", true: "cache"}[skip], func(b *testing.B) {
			pods := NewClient[corev1.Pod](conn)
			pods.codec.wire.SkipManagedFields = skip
			b.SetBytes(int64(len(pb)))
			b.ReportAllocs()
			for b.Loop() {
				if items, err := pods.List(b.Context(), ListOptions{}); err != nil || len(items) != 500 {
					b.Fatal(len(items), err)
				}
			}
		})
	}
}

// events reads w to its end.
func readEvents[P any](w *watchStream[P]) ([]watchEvent[P], error) {
	var out []watchEvent[P]
	for {
		ev, err := w.Next()
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
}

func TestCodec_ProtobufWatch_BadObjectIsAnEventAndTheStreamGoesOn(t *testing.T) {
	bad := envelope("Pod", badPodProto("shop", "broken"))
	var stream []byte
	stream = append(stream, watchFrame("ADDED", podProto(realisticPod(1)))...)
	stream = append(stream, watchFrame("MODIFIED", bad)...)
	stream = append(stream, watchFrame("BOOKMARK", podProto(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "77"}}))...)
	stream = append(stream, watchFrame("ERROR", statusProto(&metav1.Status{Status: "Failure", Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old"}))...)
	evs, err := readEvents(newWatchStream(podCodec(), mediaProtobuf+";stream=watch", io.NopCloser(bytes.NewReader(stream))))
	if err != io.EOF {
		t.Fatalf("Next at the end = %v, want io.EOF", err)
	}
	if len(evs) != 4 {
		t.Fatalf("got %d events, want 4", len(evs))
	}
	if evs[0].Type != "ADDED" || evs[0].Err != nil || evs[0].Object.Name != realisticPod(1).Name || evs[0].Object.Kind != "Pod" {
		t.Errorf("event 0 = %s %v %v, want ADDED of %s", evs[0].Type, evs[0].Err, evs[0].Object, realisticPod(1).Name)
	}
	if evs[1].Type != "MODIFIED" || evs[1].Err == nil || !strings.Contains(evs[1].Err.Error(), "shop/broken") {
		t.Errorf("event 1 = %s, err %v; want MODIFIED with an error naming shop/broken", evs[1].Type, evs[1].Err)
	}
	if evs[2].Type != "BOOKMARK" || evs[2].Object.ResourceVersion != "77" {
		t.Errorf("event 2 = %s %v, want BOOKMARK at 77", evs[2].Type, evs[2].Object)
	}
	if evs[3].Type != "ERROR" || evs[3].Status == nil || evs[3].Status.Code != 410 {
		t.Errorf("event 3 = %s %v, want ERROR with status 410", evs[3].Type, evs[3].Status)
	}
}

func TestCodec_ProtobufWatch_TruncatedFrameEndsTheStreamWithAnError(t *testing.T) {
	frame := watchFrame("ADDED", podProto(realisticPod(1)))
	for _, cut := range []int{2, 4, len(frame) - 1} {
		w := newWatchStream(podCodec(), mediaProtobuf, io.NopCloser(bytes.NewReader(append(append([]byte{}, frame...), frame[:cut]...))))
		evs, err := readEvents(w)
		if len(evs) != 1 || err == nil || err == io.EOF || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("cut at %d: %d events, err %v; want 1 event and an unexpected-EOF error", cut, len(evs), err)
		}
	}
	huge := binary.BigEndian.AppendUint32(nil, 1<<31)
	if _, err := newWatchStream(podCodec(), mediaProtobuf, io.NopCloser(bytes.NewReader(huge))).Next(); err == nil || err == io.EOF {
		t.Errorf("a 2 GiB frame header: err = %v, want an error", err)
	}
}

func TestCodec_JSONWatch_BadObjectIsAnEvent_GarbageEndsTheStream(t *testing.T) {
	stream := `{"type":"ADDED","object":{"metadata":{"name":"a","namespace":"n"},"spec":{"size":3}}}
{"type":"MODIFIED","object":{"metadata":{"name":"b","namespace":"n"},"spec":{"size":"three"}}}
{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","code":410,"reason":"Expired"}}
{"type":"DELETED","object":{"metadata":{"na`
	evs, err := readEvents(newWatchStream(gizmoCodec(), mediaJSON, io.NopCloser(strings.NewReader(stream))))
	if len(evs) != 3 || err == nil || err == io.EOF {
		t.Fatalf("got %d events, err %v; want 3 events and an error for the truncated one", len(evs), err)
	}
	if evs[0].Object == nil || evs[0].Object.Spec.Size != 3 || evs[0].Object.Kind != "Gizmo" || evs[0].Object.APIVersion != "kctl.example.com/v1" {
		t.Errorf("event 0 = %+v, want the gizmo n/a of size 3 with its TypeMeta", evs[0].Object)
	}
	if evs[1].Err == nil || !strings.Contains(evs[1].Err.Error(), "n/b") {
		t.Errorf("event 1 err = %v, want one naming n/b", evs[1].Err)
	}
	if evs[2].Status == nil || evs[2].Status.Code != 410 {
		t.Errorf("event 2 = %+v, want an ERROR with status 410", evs[2])
	}
}

// Events of every size, big and small in turn, decode in order, the
// protobuf ones through pooled buffers and the JSON ones through a decoder
// made again after each big event (its buffer only grows).
func TestCodec_WatchOfBigAndSmallEvents_DecodesEveryOne(t *testing.T) {
	sizes := []int{10, 100 << 10, 5, 40 << 10, 1 << 10, 200 << 10, 0}
	pod := func(i, size int) *corev1.Pod {
		p := realisticPod(i)
		p.Annotations = map[string]string{"pad": strings.Repeat("p", size)}
		return p
	}
	var protoStream, jsonStream bytes.Buffer
	for i, size := range sizes {
		protoStream.Write(watchFrame("MODIFIED", podProto(pod(i, size))))
		b, err := json.Marshal(map[string]any{"type": "MODIFIED", "object": pod(i, size)})
		if err != nil {
			t.Fatal(err)
		}
		jsonStream.Write(append(b, '\n'))
	}
	for _, c := range []struct {
		ct     string
		stream []byte
	}{{mediaProtobuf, protoStream.Bytes()}, {mediaJSON, jsonStream.Bytes()}} {
		evs, err := readEvents(newWatchStream(podCodec(), c.ct, io.NopCloser(bytes.NewReader(c.stream))))
		if err != io.EOF || len(evs) != len(sizes) {
			t.Fatalf("%s: %d events and %v, want %d and io.EOF", c.ct, len(evs), err, len(sizes))
		}
		for i, ev := range evs {
			want := pod(i, sizes[i])
			if ev.Err != nil || ev.Object.Name != want.Name || ev.Object.Annotations["pad"] != want.Annotations["pad"] {
				t.Errorf("%s: event %d: err %v, not the pod with %d bytes of annotation", c.ct, i, ev.Err, sizes[i])
			}
		}
	}
}
