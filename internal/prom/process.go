package prom

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
)

// userHZ is the unit of the clock-tick fields of /proc/self/stat: Linux
// reports them in USER_HZ, 100 on every architecture Go supports.
const userHZ = 100

// CollectProcess adds the process_* series as the Prometheus Go client's
// process collector names them, read from Linux's /proc/self (stat,
// limits, fd) and /proc/stat:
//
//	process_cpu_seconds_total         counter, user + system CPU time
//	process_resident_memory_bytes     gauge
//	process_virtual_memory_bytes      gauge
//	process_virtual_memory_max_bytes  gauge, the address-space limit
//	process_open_fds                  gauge
//	process_max_fds                   gauge, the soft limit
//	process_start_time_seconds        gauge, since the Unix epoch
//
// An unlimited address space is 1.8446744073709552e+19. Where /proc is
// missing (not Linux) it adds nothing, as the client's collector; a /proc
// file that does not parse leaves out the series it feeds.
func CollectProcess(p *Page) {
	collectStat(p)
	fds, err := os.ReadDir("/proc/self/fd")
	if err == nil {
		p.Gauge("process_open_fds",
			"Number of open file descriptors.",
			float64(len(fds)))
	}
	collectLimits(p)
}

// collectStat adds the series read from /proc/self/stat.
func collectStat(p *Page) {
	st, err := readProcStat()
	if err != nil {
		return
	}
	p.Counter("process_cpu_seconds_total",
		"Total user and system CPU time spent in seconds.",
		st.cpuSeconds)
	p.Gauge("process_virtual_memory_bytes",
		"Virtual memory size in bytes.",
		st.virtualBytes)
	p.Gauge("process_resident_memory_bytes",
		"Resident memory size in bytes.",
		st.residentBytes)
	boot, err := bootTime()
	if err != nil {
		return
	}
	start := boot + st.startTicks/userHZ
	p.Gauge("process_start_time_seconds",
		"Start time of the process since unix epoch in seconds.",
		start)
}

// collectLimits adds the series read from /proc/self/limits.
func collectLimits(p *Page) {
	limits, err := os.ReadFile("/proc/self/limits")
	if err != nil {
		return
	}
	fds, err := softLimit(limits, "Max open files")
	if err == nil {
		p.Gauge("process_max_fds",
			"Maximum number of open file descriptors.",
			fds)
	}
	as, err := softLimit(limits, "Max address space")
	if err == nil {
		p.Gauge("process_virtual_memory_max_bytes",
			"Maximum amount of virtual memory available in bytes.",
			as)
	}
}

// procStat is what CollectProcess uses of /proc/self/stat.
type procStat struct {
	cpuSeconds    float64
	virtualBytes  float64
	residentBytes float64
	// startTicks is the start time, in clock ticks after boot.
	startTicks float64
}

// readProcStat reads /proc/self/stat.
func readProcStat() (procStat, error) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseProcStat(b, os.Getpagesize())
}

// parseProcStat parses the text of /proc/<pid>/stat (see
// proc_pid_stat(5)). The command name, field 2, is in parentheses and may
// hold spaces and parentheses, so the fields are counted from the last ')'.
func parseProcStat(b []byte, pageSize int) (procStat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, errors.New(
			"no ')' after the command name")
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3, the state
	if len(f) < 24-2 {
		return procStat{}, fmt.Errorf(
			"%d fields after the command name, "+
				"want at least 22", len(f))
	}
	var v [25]float64 // v[n] is field n, for the fields used
	for _, n := range []int{14, 15, 22, 23, 24} {
		x, err := strconv.ParseFloat(f[n-3], 64)
		if err != nil {
			return procStat{}, fmt.Errorf("field %d: %w", n, err)
		}
		v[n] = x
	}
	// utime + stime, in clock ticks; the resident size is in pages.
	return procStat{
		cpuSeconds:    (v[14] + v[15]) / userHZ,
		startTicks:    v[22],
		virtualBytes:  v[23],
		residentBytes: v[24] * float64(pageSize),
	}, nil
}

// bootTime returns the system's boot time in seconds since the Unix
// epoch, the "btime" line of /proc/stat.
func bootTime() (float64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		v, ok := strings.CutPrefix(line, "btime ")
		if ok {
			v = strings.TrimSpace(v)
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, errors.New("/proc/stat has no btime line")
}

// softLimit returns the soft limit of the named resource from the text
// of /proc/self/limits, whose lines are "Max open files  1024  4096
// files"; "unlimited" is the largest uint64, as the client's collector
// reports it.
func softLimit(limits []byte, resource string) (float64, error) {
	for line := range strings.Lines(string(limits)) {
		rest, ok := strings.CutPrefix(line, resource+" ")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			break
		}
		if f[0] == "unlimited" {
			return math.MaxUint64, nil
		}
		return strconv.ParseFloat(f[0], 64)
	}
	return 0, fmt.Errorf(
		"/proc/self/limits has no %q line", resource)
}
