// Command request is a size floor: clientcmd plus one request sent through
// rest's HTTP client, which links the client side of net/http (the
// transport, HTTP/2, proxies) that the floors before it leave out because
// they never send anything. Every controller sends requests.
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
	hc, err := rest.HTTPClientFor(cfg)
	fmt.Println(err)
	fmt.Println(hc.Get(cfg.Host))
}
