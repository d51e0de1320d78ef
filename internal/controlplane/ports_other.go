//go:build !unix

package controlplane

import "os"

// lockPort holds nothing where flock is missing: the ephemeral range alone
// keeps port-0 listeners away.
func lockPort(path string) (*os.File, bool) { return nil, true }

func unlockPort(f *os.File) {}
