// Command server is a size floor: request plus an HTTP server, as a
// controller that serves metrics and health probes links.
package main

import (
	"fmt"
	"net/http"

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
	fmt.Println(http.ListenAndServe("127.0.0.1:0", nil))
}
