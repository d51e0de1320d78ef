// Command onetype is the floor of typecost/one: what any program that
// reads and writes its type (Pod) through client-go's rest client pays
// without kctl: the type's protobuf and JSON code and DeepCopy, kubeconfig
// loading (clientcmd), rest's HTTP client and one request sent.
package main

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// object is what the floor links of each type.
type object interface {
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}

func main() {
	var p corev1.Pod
	use(&p, p.DeepCopy())
	cfg, err := clientcmd.BuildConfigFromFlags("", "")
	fmt.Println(err)
	hc, err := rest.HTTPClientFor(cfg)
	fmt.Println(err)
	fmt.Println(hc.Get(cfg.Host))
}

// use links obj's protobuf and JSON code, and keeps its copy.
func use(obj object, copied any) {
	b, err := obj.Marshal()
	fmt.Println(err, obj.Unmarshal(b), copied)
	b, err = json.Marshal(obj)
	fmt.Println(err, json.Unmarshal(b, obj))
}
