// Command rest is a size floor: types plus an HTTP client for the API server
// made by client-go's rest package (TLS, authentication, exec plugins).
package main

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
)

func main() {
	var p corev1.Pod
	var rs appsv1.ReplicaSet
	fmt.Println(p.Unmarshal(nil), rs.Unmarshal(nil), p.DeepCopy(), rs.DeepCopy())
	fmt.Println(rest.HTTPClientFor(&rest.Config{}))
}
