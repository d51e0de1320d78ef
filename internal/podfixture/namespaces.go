package podfixture

import "fmt"

// Namespaces is n namespaces named as clusters name them: teams, services
// by stage, platform tools, then tenant-0001, tenant-0002... Names like
// these hash badly into equal ranges (their FNV hashes differ little), so
// sharding's tests and benchmarks measure balance on them. The same n
// always gives the same names.
func Namespaces(n int) []string {
	ns := []string{"team-a", "team-b", "team-c", "payments-prod", "payments-staging",
		"checkout-prod", "checkout-staging", "search-prod", "search-staging", "data-platform",
		"ml-training", "monitoring", "logging", "ingress-nginx", "cert-manager", "argocd", "ci"}
	for i := 1; len(ns) < n; i++ {
		ns = append(ns, fmt.Sprintf("tenant-%04d", i))
	}
	return ns[:n]
}
