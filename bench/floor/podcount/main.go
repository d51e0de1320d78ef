// Command podcount is the floor of the podcount controller (podcount/kctl):
// floor/onetype with podcount's types, Pod and ReplicaSet.
package main

import (
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
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
	var rs appsv1.ReplicaSet
	use(&p, p.DeepCopy())
	use(&rs, rs.DeepCopy())
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
