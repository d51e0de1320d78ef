package main

// What benchrun shard reads of a running replica and of the control
// plane: the metrics page, a forced GC, free ports, the control plane's
// processes and their CPU.

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// scrape reads the series benchrun shard needs from a metrics page:
// reconciles, depth and active of the podcount controller, members,
// owned and handovers of the shard, cached ReplicaSets and cache bytes,
// and the heap's live bytes.
func scrape(url string) (map[string]float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return parseShardMetrics(resp.Body)
}

// parseShardMetrics reads a metrics page in the Prometheus text format
// into the values scrape names.
func parseShardMetrics(r io.Reader) (map[string]float64, error) {
	m := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		series := line[:i]
		name, labels, _ := strings.Cut(series, "{")
		switch {
		case name == "controller_runtime_reconcile_total" && strings.Contains(labels, `controller="podcount"`):
			m["reconciles"] += v
		case name == "workqueue_depth" && strings.Contains(labels, `controller="podcount"`):
			m["depth"] += v
		case name == "controller_runtime_active_workers" && strings.Contains(labels, `controller="podcount"`):
			m["active"] += v
		case name == "kctl_shard_members":
			m["members"] = v
		case name == "kctl_shard_ranges_owned":
			m["owned"] = v
		case name == "kctl_shard_handovers_total":
			m["handovers"] = v
		case name == "kctl_cache_objects" && strings.Contains(labels, `resource="replicasets.apps/`):
			m["cached"] += v
		case name == "kctl_cache_objects" && strings.Contains(labels, `resource="pods/`):
			m["pods"] += v
		case name == "kctl_cache_bytes" || name == "kctl_cache_metadata_bytes":
			m["cache_bytes"] += v
		case name == "go_memstats_heap_alloc_bytes":
			m["heap"] = v
		}
	}
	return m, sc.Err()
}

// collectGarbage asks a replica's pprof endpoint for a heap profile after a
// GC (heap?gc=1), so that the heap read next is what is live.
func collectGarbage(url string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return err
}

// freeLoopbackPorts returns n addresses 127.0.0.1:PORT free a moment ago.
func freeLoopbackPorts(n int) ([]string, error) {
	var addrs []string
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs, nil
}

// controlPlanePIDs finds the kube-apiserver and etcd serving kubeconfig:
// the processes whose command line names the kubeconfig's folder (the
// control plane's files, hack/controlplane). None found: no control plane
// CPU is reported.
func controlPlanePIDs(kubeconfig string) []int {
	dir := filepath.Dir(kubeconfig)
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		argv := strings.Split(string(cmdline), "\x00")
		base := filepath.Base(argv[0])
		if (base == "kube-apiserver" || base == "etcd") && strings.Contains(string(cmdline), dir+"/") {
			pids = append(pids, pid)
		}
	}
	return pids
}

func sumCPU(pids []int) float64 {
	s := 0.0
	for _, pid := range pids {
		c, _ := cpuSeconds(pid)
		s += c
	}
	return s
}
