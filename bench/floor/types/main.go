// Command types is a size floor: it links only what every podcount binary
// must hold for its two types (decoding and copying Pods and ReplicaSets).
package main

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

func main() {
	var p corev1.Pod
	var rs appsv1.ReplicaSet
	fmt.Println(p.Unmarshal(nil), rs.Unmarshal(nil), p.DeepCopy(), rs.DeepCopy())
}
