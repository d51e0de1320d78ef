package share

import (
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"

	"github.com/kctl-dev/kctl/internal/podfixture"
)

// decodedFixturePod is podfixture's i-th Pod decoded from protobuf into
// memory of its own, managedFields dropped, as the cache gets it.
func decodedFixturePod(t *testing.T, i int) *corev1.Pod {
	t.Helper()
	raw, err := podfixture.Pod("shop", i).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	p := new(corev1.Pod)
	err = p.Unmarshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	p.ManagedFields = nil
	return p
}

func samePtr[T any](a, b *T) bool { return a == b }

func sameSlice[T any](a, b []T) bool {
	return unsafe.SliceData(a) == unsafe.SliceData(b)
}

// Two Pods of one workload differ in their own token volume, mounted in
// every container, and in their status's times and IDs. Everything below
// those differences is shared: each container's env, ports, resources,
// probes, image, args and securityContext, each volume's source, the
// conditions' types and the container statuses' images.
func TestSharer_VariedPodsShareBelowTheirDifferences(t *testing.T) {
	s := New((*corev1.Pod)(nil))
	var pods []*corev1.Pod
	for i := range 200 {
		p := decodedFixturePod(t, i)
		s.Share(p)
		pods = append(pods, p)
	}
	// Pods 120 and 140 belong to workload 0: a proxy sidecar, a log
	// shipper, an init container, a metrics port.
	a := pods[120]
	b := pods[140]
	if a.Spec.Volumes[1].Name == b.Spec.Volumes[1].Name {
		t.Fatalf("the fixture's Pods share a token volume name %q", a.Spec.Volumes[1].Name)
	}
	if len(a.Spec.Containers) != 3 || len(a.Spec.InitContainers) != 1 {
		t.Fatalf("Pod 120 has %d containers and %d init containers, want 3 and 1",
			len(a.Spec.Containers), len(a.Spec.InitContainers))
	}
	type check struct {
		what   string
		shared bool
	}
	var checks []check
	add := func(what string, shared bool) {
		checks = append(checks, check{what, shared})
	}
	containers := func(ca, cb []corev1.Container, kind string) {
		for i := range ca {
			x := &ca[i]
			y := &cb[i]
			n := kind + " " + x.Name
			add(n+" image", sameString(x.Image, y.Image))
			add(n+" env", sameSlice(x.Env, y.Env))
			add(n+" args", sameSlice(x.Args, y.Args))
			add(n+" requests", sameMap(x.Resources.Requests, y.Resources.Requests))
			if x.Resources.Limits != nil {
				add(n+" limits", sameMap(x.Resources.Limits, y.Resources.Limits))
			}
			if x.Ports != nil {
				add(n+" ports", sameSlice(x.Ports, y.Ports))
			}
			if x.ReadinessProbe != nil {
				add(n+" readinessProbe", samePtr(x.ReadinessProbe, y.ReadinessProbe))
			}
			if x.LivenessProbe != nil {
				add(n+" livenessProbe", samePtr(x.LivenessProbe, y.LivenessProbe))
			}
			if x.SecurityContext != nil {
				add(n+" securityContext", samePtr(x.SecurityContext, y.SecurityContext))
			}
			last := len(x.VolumeMounts) - 1
			add(n+" token mount path", sameString(x.VolumeMounts[last].MountPath, y.VolumeMounts[last].MountPath))
		}
	}
	containers(a.Spec.Containers, b.Spec.Containers, "container")
	containers(a.Spec.InitContainers, b.Spec.InitContainers, "init container")
	add("config volume source", samePtr(a.Spec.Volumes[0].ConfigMap, b.Spec.Volumes[0].ConfigMap))
	add("token volume source", samePtr(a.Spec.Volumes[1].Projected, b.Spec.Volumes[1].Projected))
	add("tolerations", sameSlice(a.Spec.Tolerations, b.Spec.Tolerations))
	add("owner references", sameSlice(a.OwnerReferences, b.OwnerReferences))
	add("labels", sameMap(a.Labels, b.Labels))
	for i := range a.Status.Conditions {
		x := &a.Status.Conditions[i]
		y := &b.Status.Conditions[i]
		add("condition type "+string(x.Type), sameString(string(x.Type), string(y.Type)))
	}
	for i := range a.Status.ContainerStatuses {
		x := &a.Status.ContainerStatuses[i]
		y := &b.Status.ContainerStatuses[i]
		add("status of "+x.Name+" image", sameString(x.Image, y.Image))
		add("status of "+x.Name+" imageID", sameString(x.ImageID, y.ImageID))
	}
	for _, c := range checks {
		if !c.shared {
			t.Errorf("Pods 120 and 140 of one workload do not share their %s", c.what)
		}
	}
}

// A Pod's own token volume name, in its volume and in each container's
// mounts, is held once: strings an object holds twice share within it,
// though not with other objects until seen in one. Once Share returns,
// the sharer keeps nothing of the object's own strings.
func TestSharer_StringHeldTwiceInOneObjectIsHeldOnce(t *testing.T) {
	s := New((*corev1.Pod)(nil))
	p := decodedFixturePod(t, 0)
	token := p.Spec.Volumes[1].Name
	s.Share(p)
	volume := p.Spec.Volumes[1].Name
	for _, c := range p.Spec.Containers {
		mount := c.VolumeMounts[len(c.VolumeMounts)-1].Name
		if mount != token || !sameString(mount, volume) {
			t.Errorf("container %s mounts %q (shared with the volume: %v), want the volume's %q",
				c.Name, mount, sameString(mount, volume), token)
		}
	}
	if len(s.mine) != 0 {
		t.Errorf("the sharer keeps %d of the object's strings after Share", len(s.mine))
	}
}

// A slice that shares with no other (its elements unique to the object)
// gets memory only as long as its elements when the decoder left spare
// room (5 conditions appended into room for 8): the spare room is freed
// with the decoded copy.
func TestSharer_UnsharedSliceLosesItsSpareRoom(t *testing.T) {
	s := New((*corev1.Pod)(nil))
	p := decodedFixturePod(t, 0)
	want := decodedFixturePod(t, 0)
	conditions := p.Status.Conditions
	if cap(conditions)-len(conditions) < 2 {
		t.Fatalf("the decoder left %d conditions in room for %d; the test needs spare room",
			len(conditions), cap(conditions))
	}
	s.Share(p)
	got := p.Status.Conditions
	if cap(got) != len(got) || sameSlice(got, conditions) {
		t.Errorf("conditions after Share: %d in room for %d (the decoded memory kept: %v), want no spare room",
			len(got), cap(got), sameSlice(got, conditions))
	}
	raw, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	wantRaw, err := want.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if string(raw) != string(wantRaw) {
		t.Errorf("sharing changed the Pod:\n%v\nwant\n%v", p, want)
	}
}
