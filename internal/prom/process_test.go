package prom

import (
	"math"
	"os"
	"syscall"
	"testing"
	"time"
)

// processCollectorFamilies are the families of client_golang's process
// collector on Linux with their types.
var processCollectorFamilies = map[string]string{
	"process_cpu_seconds_total":        "counter",
	"process_resident_memory_bytes":    "gauge",
	"process_virtual_memory_bytes":     "gauge",
	"process_virtual_memory_max_bytes": "gauge",
	"process_open_fds":                 "gauge",
	"process_max_fds":                  "gauge",
	"process_start_time_seconds":       "gauge",
}

func TestCollectProcess_ReadsFromProc(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skipf("no /proc: %v", err) // not Linux: no process_* series
	}
	before := samples(collected(t, CollectProcess))
	openBefore := countOpenFDs(t)
	page := collected(t, CollectProcess)
	openAfter := countOpenFDs(t)
	typ, help := familyDocs(page)
	for name, want := range processCollectorFamilies {
		if typ[name] != want {
			t.Errorf("# TYPE %s = %q, want %q", name, typ[name], want)
		}
	}
	cpuHelp := "Total user and system CPU time spent in seconds."
	if h := help["process_cpu_seconds_total"]; h != cpuHelp {
		t.Errorf("# HELP process_cpu_seconds_total = %q, want the process collector's", h)
	}
	s := samples(page)
	// Other tests' files may close meanwhile: the count is bracketed.
	fds := value(t, s, "process_open_fds")
	low := float64(min(openBefore, openAfter))
	high := float64(max(openBefore, openAfter))
	if fds < low || fds > high {
		t.Errorf("process_open_fds = %v, want the %v to %v open around the scrape", fds, low, high)
	}
	checkLimits(t, s)
	rss := value(t, s, "process_resident_memory_bytes")
	vsize := value(t, s, "process_virtual_memory_bytes")
	if rss < 1<<20 || vsize < rss {
		t.Errorf("process_resident_memory_bytes = %v, process_virtual_memory_bytes = %v: "+
			"want 1 MiB <= resident <= virtual", rss, vsize)
	}
	cpu := value(t, s, "process_cpu_seconds_total")
	if cpu < 0 || cpu < value(t, before, "process_cpu_seconds_total") {
		t.Errorf("process_cpu_seconds_total = %v, went down or negative", cpu)
	}
	// The test binary started at most a day ago and not in the future
	// (the start time is in clock ticks after boot: 10 ms steps).
	now := float64(time.Now().UnixNano()) / 1e9
	start := value(t, s, "process_start_time_seconds")
	if start > now+1 || start < now-86400 {
		t.Errorf("process_start_time_seconds = %v, now is %v", start, now)
	}
}

// checkLimits checks that process_max_fds and
// process_virtual_memory_max_bytes are this process's soft limits.
func checkLimits(t *testing.T, s map[string]string) {
	t.Helper()
	var nofile, as syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &nofile); err != nil {
		t.Fatal(err)
	}
	if got := value(t, s, "process_max_fds"); got != float64(nofile.Cur) {
		t.Errorf("process_max_fds = %v, want the soft limit %d", got, nofile.Cur)
	}
	if err := syscall.Getrlimit(syscall.RLIMIT_AS, &as); err != nil {
		t.Fatal(err)
	}
	got := value(t, s, "process_virtual_memory_max_bytes")
	if got != float64(as.Cur) {
		t.Errorf("process_virtual_memory_max_bytes = %v, want the soft limit %d", got, as.Cur)
	}
}

func TestParseProcStat_CommandWithParenthesesAndSpaces(t *testing.T) {
	// Fields 1..24 of proc_pid_stat(5); comm is "a) (b c)".
	stat := "42 (a) (b c)) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 " +
		"0 0 20 0 7 0 12345 1000000 300 18446744073709551615\n"
	st, err := parseProcStat([]byte(stat), 4096)
	if err != nil {
		t.Fatal(err)
	}
	want := procStat{
		cpuSeconds:    3,
		startTicks:    12345,
		virtualBytes:  1e6,
		residentBytes: 300 * 4096,
	}
	if st != want {
		t.Errorf("parseProcStat = %+v, want %+v", st, want)
	}
	for _, bad := range []string{
		"42 (no end",
		"42 (x) S 1 2",
		"42 (x) S 1 42 42 0 -1 4194560 100 0 0 0 x 50 0 0 20 0 7 0 12345 1000000 300",
	} {
		if _, err := parseProcStat([]byte(bad), 4096); err == nil {
			t.Errorf("parseProcStat(%q) = nil error, want one", bad)
		}
	}
}

func TestSoftLimit_NumbersAndUnlimited(t *testing.T) {
	limits := []byte(`Limit                     Soft Limit           Hard Limit           Units
Max address space         unlimited            unlimited            bytes
Max open files            1024                 524288               files
`)
	for _, c := range []struct {
		resource string
		want     float64
	}{
		{"Max open files", 1024},
		{"Max address space", math.MaxUint64},
	} {
		got, err := softLimit(limits, c.resource)
		if err != nil || got != c.want {
			t.Errorf("softLimit(%q) = %v, %v; want %v", c.resource, got, err, c.want)
		}
	}
	if _, err := softLimit(limits, "Max processes"); err == nil {
		t.Errorf("softLimit of a missing line = nil error, want one")
	}
}

// countOpenFDs counts the entries of /proc/self/fd, the one that reads
// it included.
func countOpenFDs(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}
