// Command clientcmd is a size floor: rest plus kubeconfig loading
// (client-go's tools/clientcmd), which every out-of-cluster controller needs.
package main

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	var p corev1.Pod
	var rs appsv1.ReplicaSet
	fmt.Println(p.Unmarshal(nil), rs.Unmarshal(nil), p.DeepCopy(), rs.DeepCopy())
	cfg, err := clientcmd.BuildConfigFromFlags("", "")
	fmt.Println(err)
	fmt.Println(rest.HTTPClientFor(cfg))
}
