//go:build crashpoints

package driver

import (
	"os"
	"syscall"
)

// With the crashpoints build tag, RDMA_MACVLAN_CRASH_TRACE=FILE appends the
// name of every crash point reached to FILE, and RDMA_MACVLAN_CRASH_AT=NAME
// kills the process with SIGKILL the first time NAME is reached.
func init() {
	at := os.Getenv("RDMA_MACVLAN_CRASH_AT")
	trace := os.Getenv("RDMA_MACVLAN_CRASH_TRACE")
	if at == "" && trace == "" {
		return
	}
	crashHook = func(name string) {
		if trace != "" {
			if f, err := os.OpenFile(trace, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
				_, _ = f.WriteString(name + "\n")
				_ = f.Sync()
				_ = f.Close()
			}
		}
		if name == at {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	}
}
