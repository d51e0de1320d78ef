package controlplane

import (
	"path/filepath"
	"strconv"
	"testing"
)

// A reserved port is outside the kernel's ephemeral range, so no port-0
// listener gets it, and its lock stops every other reservation until Release.
func TestReservePorts_HeldUntilRelease(t *testing.T) {
	held, err := ReservePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := ephemeralRange()
	seen := map[int]bool{}
	for _, p := range held.Ports {
		if p >= lo && p <= hi {
			t.Errorf("port %d is inside the ephemeral range %d-%d", p, lo, hi)
		}
		if seen[p] {
			t.Errorf("port %d reserved twice in %v", p, held.Ports)
		}
		seen[p] = true
	}
	path := filepath.Join(portLockDir(), strconv.Itoa(held.Ports[0])+".lock")
	if f, ok := lockPort(path); ok {
		unlockPort(f)
		t.Fatalf("port %d's lock was taken again while held", held.Ports[0])
	}
	held.Release()
	f, ok := lockPort(path)
	if !ok {
		t.Fatalf("port %d's lock is still held after Release", held.Ports[0])
	}
	unlockPort(f)
	held.Release() // idempotent
}
