package share

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"runtime"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// BenchmarkSharer_Pods is the cost of sharing 500 decoded Pods (ns/op is
// per 500), the price the cache pays per stored object, on realistic Pods
// (podfixture) and near-identical ones (replicaPod). The same Pods are
// shared again and again, so their unique values are remembered too: for
// the cost of sharing Pods once each, as a sync does, profile
// BenchmarkSharer_RetainedHeap (bench/BENCHMARKS.md, "Finer sharing": about as
// much as decoding them).
func BenchmarkSharer_Pods(b *testing.B) {
	fixtures := []struct {
		name string
		pod  func(i int) *corev1.Pod
	}{
		{"realistic", fixturePod},
		{"identical", replicaPod},
	}
	for _, f := range fixtures {
		b.Run(f.name, func(b *testing.B) {
			benchmarkSharePods(b, f.pod)
		})
	}
}

func benchmarkSharePods(b *testing.B, pod func(i int) *corev1.Pod) {
	var raws [][]byte
	for i := range 500 {
		raw, err := pod(i).Marshal()
		if err != nil {
			b.Fatal(err)
		}
		raws = append(raws, raw)
	}
	s := New((*corev1.Pod)(nil))
	pods := make([]corev1.Pod, len(raws))
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		for i, raw := range raws {
			pods[i] = corev1.Pod{}
			err := pods[i].Unmarshal(raw)
			if err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		for i := range pods {
			s.Share(&pods[i])
		}
	}
}

// Sharing never changes what an object says, and the Pods of one workload
// end up holding one copy of their containers, volumes and tolerations,
// while what differs (node, IP, image) stays their own. Readers of shared
// objects run meanwhile: the race detector sees any write to shared
// memory; and collections run, which free the copies of Pods no longer
// held.
func TestSharer_KeepsContentAndSharesMemory(t *testing.T) {
	const n = 300
	const warm = 30
	var raws [][]byte
	for i := range n {
		p := replicaPod(i)
		image := fmt.Sprintf("registry.example.com/shop/web:1.%d", i%3)
		p.Spec.Containers[0].Image = image
		if i%7 == 0 {
			p.Labels = map[string]string{"app": "web", "canary": "true"}
		}
		raw, err := p.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		raws = append(raws, raw)
	}
	decode := func(raw []byte) *corev1.Pod {
		p := new(corev1.Pod)
		err := p.Unmarshal(raw)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	s := New((*corev1.Pod)(nil))
	shared := make(chan *corev1.Pod, n)
	var readers sync.WaitGroup
	// The reader reads every shared Pod, as handlers and Get callers do.
	readers.Go(func() {
		for p := range shared {
			_, err := p.DeepCopy().Marshal()
			if err != nil {
				t.Error(err)
			}
		}
	})
	pods := make([]*corev1.Pod, n)
	for i, raw := range raws {
		pods[i] = decode(raw)
		s.Share(pods[i])
		shared <- pods[i]
		if i%50 == 0 {
			// A Pod deleted at once: its parts are freed below.
			s.Share(decode(raws[i]))
			runtime.GC()
		}
	}
	close(shared)
	readers.Wait()
	containers := map[*corev1.Container]bool{}
	volumes := map[*corev1.Volume]bool{}
	for i, p := range pods {
		got, err := p.Marshal()
		if err != nil || !bytes.Equal(got, raws[i]) {
			t.Fatalf("pod %d changed by sharing (err %v):\n%v\nwant\n%v",
				i, err, p, decode(raws[i]))
		}
		if i >= warm {
			containers[&p.Spec.Containers[0]] = true
			volumes[&p.Spec.Volumes[0]] = true
		}
		if i > 0 && sameString(p.Status.PodIP, pods[i-1].Status.PodIP) {
			t.Errorf("pods %d and %d share a PodIP", i-1, i)
		}
	}
	if len(containers) != 3 || len(volumes) != 1 {
		t.Errorf("pods %d to %d hold %d copies of their containers "+
			"(want 3: one per image) and %d of their volumes (want 1)",
			warm, n-1, len(containers), len(volumes))
	}
	c := pods[n-1].Spec.Containers
	if cap(c) != len(c) {
		t.Errorf("a shared slice has spare capacity %d > %d: "+
			"an append would write into other objects", cap(c), len(c))
	}
}

// replicaJSON is the first Pod of a ReplicaSet, scheduled and running,
// with the defaults the API server adds, as kctl's realisticPod(0)
// (codec_test.go) makes it, but for its managedFields.
//
// specFields and statusFields are its managedFields as the API server
// records them: about half of the pod's protobuf, as in a real cluster.
var (
	//go:embed testdata/replica-pod.json
	replicaJSON []byte
	//go:embed testdata/spec-fields.json
	specFields string
	//go:embed testdata/status-fields.json
	statusFields string
)

// replicaPod is the i-th Pod of the ReplicaSet in replicaJSON, equal to
// kctl's realisticPod(i): the Pods differ in their name, uid,
// resourceVersion, node and IP only.
func replicaPod(i int) *corev1.Pod {
	p := new(corev1.Pod)
	err := json.Unmarshal(replicaJSON, p)
	if err != nil {
		panic(err)
	}
	uid := fmt.Sprintf("3f2a1b4c-0000-4000-8000-%012d", i)
	ip := fmt.Sprintf("10.244.%d.%d", i/250, i%250)
	p.Name = fmt.Sprintf("web-7d4b9c6f5-%05d", i)
	p.UID = types.UID(uid)
	p.ResourceVersion = fmt.Sprint(100000 + i)
	p.Spec.NodeName = fmt.Sprintf("node-%d", i%20)
	p.Status.PodIP = ip
	p.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	spec := managed("kube-controller-manager", 1700000000, specFields)
	status := managed("kubelet", 1700000010, statusFields)
	status.Subresource = "status"
	p.ManagedFields = []metav1.ManagedFieldsEntry{spec, status}
	return p
}

// managed is what manager last wrote (fields), at Unix time at.
func managed(manager string, at int64, fields string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{
		Manager:    manager,
		Operation:  "Update",
		APIVersion: "v1",
		Time:       new(metav1.Unix(at, 0)),
		FieldsType: "FieldsV1",
		FieldsV1:   &metav1.FieldsV1{Raw: []byte(fields)},
	}
}
