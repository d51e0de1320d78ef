package controlplane

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Ports is a set of loopback ports held for servers about to bind them.
//
// A port picked by listening on port 0 and closing is free only until
// someone else binds it: the kernel may hand it to the next port-0 listener
// (another test's server, an outgoing connection) before ours binds it. So
// ReservePorts picks ports outside the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range), which no port-0 listener or
// outgoing connection is given, and holds a lock file per port (an flock on
// an empty file in the user's cache, kctl-ports, released when this process
// ends however it ends), which every kctl test process of the user
// respects. A port is held until
// Release: call it once the servers have bound their ports, or never.
type Ports struct {
	Ports []int
	mu    sync.Mutex
	held  []*os.File
}

// ReservePorts returns n distinct held loopback ports, each free when
// picked; an error if fewer than n could be found among 500 tries.
func ReservePorts(n int) (*Ports, error) {
	lo, hi := ephemeralRange()
	dir := portLockDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cannot make the port lock directory: %w", err)
	}
	p := &Ports{}
	for try := 0; try < 500 && len(p.Ports) < n; try++ {
		port := pickOutside(lo, hi)
		if slices.Contains(p.Ports, port) {
			continue
		}
		lock, ok := lockPort(filepath.Join(dir, strconv.Itoa(port)+".lock"))
		if !ok {
			continue
		}
		if !bindable(port) {
			unlockPort(lock)
			continue
		}
		p.Ports = append(p.Ports, port)
		p.held = append(p.held, lock)
	}
	if len(p.Ports) < n {
		p.Release()
		return nil, fmt.Errorf("no %d free loopback ports outside the ephemeral range %d-%d "+
			"after 500 tries", n, lo, hi)
	}
	return p, nil
}

// Addr returns 127.0.0.1:port for the i-th port.
func (p *Ports) Addr(i int) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Ports[i]))
}

// Release lets other kctl processes pick the ports again. Idempotent.
func (p *Ports) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range p.held {
		unlockPort(f)
	}
	p.held = nil
}

// portLockDir holds the ports' lock files: in the user's cache, not in
// $TMPDIR, which differs between test binaries (and which a test binary's
// files must not outlive), and beside kctl's folder, whose presence says the
// control plane was built; the files stay, empty, for the next process.
func portLockDir() string {
	cache, err := os.UserCacheDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "kctl-ports")
	}
	return filepath.Join(cache, "kctl-ports")
}

// ephemeralRange is the kernel's range for port-0 listeners and outgoing
// connections; Linux's default where it cannot be read.
func ephemeralRange() (int, int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768, 60999
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 32768, 60999
	}
	lo, err1 := strconv.Atoi(f[0])
	hi, err2 := strconv.Atoi(f[1])
	if errors.Join(err1, err2) != nil {
		return 32768, 60999
	}
	return lo, hi
}

// pickOutside returns a random port in 10000-65535 outside lo-hi, or in
// 1024-65535 when that leaves none.
func pickOutside(lo, hi int) int {
	var candidates [][2]int
	if lo > 10000 {
		candidates = append(candidates, [2]int{10000, lo - 1})
	}
	if hi < 65535 {
		candidates = append(candidates, [2]int{hi + 1, 65535})
	}
	if len(candidates) == 0 {
		return 1024 + rand.IntN(65535-1024+1)
	}
	size := 0
	for _, c := range candidates {
		size += c[1] - c[0] + 1
	}
	k := rand.IntN(size)
	for _, c := range candidates {
		if k <= c[1]-c[0] {
			return c[0] + k
		}
		k -= c[1] - c[0] + 1
	}
	return candidates[0][0]
}

func bindable(port int) bool {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}
