// Package fieldlabel lists the field labels the API server filters a
// built-in kind's lists by (a field selector), beyond metadata.name and
// metadata.namespace, which every kind has (Node, Namespace and
// CertificateSigningRequest: metadata.name only). It is copied from the field
// label conversions of Kubernetes 1.36 (pkg/apis/*/v*/conversion.go); a
// kind not listed has only the two. A custom resource may add the fields
// its CRD lists in selectableFields, which only the server knows.
package fieldlabel

import "slices"

// labels maps "group/Kind" ("" group: core) to the kind's own field
// labels, sorted.
var labels = map[string][]string{
	"/Pod": {
		"spec.hostNetwork", "spec.nodeName",
		"spec.restartPolicy", "spec.schedulerName",
		"spec.serviceAccountName", "status.nominatedNodeName",
		"status.phase", "status.podIP", "status.podIPs",
	},
	"/Node":                  {"spec.unschedulable"},
	"/ReplicationController": {"status.replicas"},
	"/Event": {
		"involvedObject.apiVersion", "involvedObject.fieldPath",
		"involvedObject.kind", "involvedObject.name",
		"involvedObject.namespace",
		"involvedObject.resourceVersion", "involvedObject.uid",
		"reason", "reportingComponent", "source", "type",
	},
	"/Namespace": {"status.phase"},
	"/Secret":    {"type"},
	"/Service":   {"spec.clusterIP", "spec.type"},
	"batch/Job":  {"status.successful"},
	"certificates.k8s.io/CertificateSigningRequest": {
		"spec.signerName",
	},
	"events.k8s.io/Event": {
		"reason", "regarding.apiVersion", "regarding.fieldPath",
		"regarding.kind", "regarding.name",
		"regarding.namespace", "regarding.resourceVersion",
		"regarding.uid", "reportingController", "type",
	},
	"resource.k8s.io/ResourceSlice": {"spec.driver", "spec.nodeName"},
}

// Of returns the field labels of group's kind beyond metadata.name and
// metadata.namespace, sorted; nil for a kind that has none. Do not
// modify the result.
func Of(group, kind string) []string {
	return labels[group+"/"+kind]
}

// Server returns the fields the API server filters group's kind by:
// metadata.name, metadata.namespace, the kind's own (Of), and then
// those of extra it has not listed (fields a list was already filtered
// by, so known to the server), without repeats.
func Server(group, kind string, extra []string) []string {
	out := []string{"metadata.name", "metadata.namespace"}
	out = append(out, Of(group, kind)...)
	for _, f := range extra {
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}
