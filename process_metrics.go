package kctl

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
)

// This file writes the process_* series of the metrics page as the
// Prometheus Go client's process collector names them, read from Linux's
// /proc/self (stat, limits, fd) and /proc/stat:
//
//	process_cpu_seconds_total          counter, user + system CPU time
//	process_resident_memory_bytes      gauge
//	process_virtual_memory_bytes       gauge
//	process_virtual_memory_max_bytes   gauge, the address-space limit (1.8446744073709552e+19: unlimited)
//	process_open_fds, process_max_fds  gauges; max is the soft limit
//	process_start_time_seconds         gauge, since the Unix epoch
//
// Where /proc is missing (not Linux) the page has no process_* series, as
// with the client's collector; a /proc file that does not parse leaves out
// the series it feeds.

// userHZ is the unit of the clock-tick fields of /proc/self/stat: Linux
// reports them in USER_HZ, 100 on every architecture Go supports.
const userHZ = 100

// collectProcess adds the process_* series to p.
func collectProcess(p page) {
	if st, err := readProcStat(); err == nil {
		p.counter("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", st.cpuSeconds)
		p.gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", st.virtualBytes)
		p.gauge("process_resident_memory_bytes", "Resident memory size in bytes.", st.residentBytes)
		if boot, err := bootTime(); err == nil {
			p.gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", boot+st.startTicks/userHZ)
		}
	}
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		p.gauge("process_open_fds", "Number of open file descriptors.", float64(len(fds)))
	}
	limits, err := os.ReadFile("/proc/self/limits")
	if err != nil {
		return
	}
	if v, err := softLimit(limits, "Max open files"); err == nil {
		p.gauge("process_max_fds", "Maximum number of open file descriptors.", v)
	}
	if v, err := softLimit(limits, "Max address space"); err == nil {
		p.gauge("process_virtual_memory_max_bytes", "Maximum amount of virtual memory available in bytes.", v)
	}
}

// procStat is what collectProcess uses of /proc/self/stat.
type procStat struct {
	cpuSeconds, virtualBytes, residentBytes, startTicks float64
}

// readProcStat reads /proc/self/stat.
func readProcStat() (procStat, error) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseProcStat(b, os.Getpagesize())
}

// parseProcStat parses the text of /proc/<pid>/stat (see proc_pid_stat(5)).
// The command name, field 2, is in parentheses and may hold spaces and
// parentheses, so the fields are counted from the last ')'.
func parseProcStat(b []byte, pageSize int) (procStat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, errors.New("no ')' after the command name")
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3, the state
	if len(f) < 24-2 {
		return procStat{}, fmt.Errorf("%d fields after the command name, want at least 22", len(f))
	}
	var v [25]float64 // v[n] is field n, for the fields used
	for _, n := range []int{14, 15, 22, 23, 24} {
		x, err := strconv.ParseFloat(f[n-3], 64)
		if err != nil {
			return procStat{}, fmt.Errorf("field %d: %w", n, err)
		}
		v[n] = x
	}
	return procStat{
		cpuSeconds:    (v[14] + v[15]) / userHZ, // utime + stime, in clock ticks
		startTicks:    v[22],                    // after boot
		virtualBytes:  v[23],
		residentBytes: v[24] * float64(pageSize), // in pages
	}, nil
}

// bootTime returns the system's boot time in seconds since the Unix epoch,
// the "btime" line of /proc/stat.
func bootTime() (float64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, errors.New("/proc/stat has no btime line")
}

// softLimit returns the soft limit of the named resource from the text of
// /proc/self/limits, whose lines are "Max open files  1024  4096  files";
// "unlimited" is the largest uint64, as the client's collector reports it.
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
	return 0, fmt.Errorf("/proc/self/limits has no %q line", resource)
}
