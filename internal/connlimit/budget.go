package connlimit

import (
	"math"

	"golang.org/x/sys/unix"
)

// Reserve is what the daemon keeps of its file descriptors for everything
// but its listeners' connections: state and CDI files, netlink sockets,
// sysfs reads.
const Reserve = 256

// minCap is the least cap a listener is given however low the limit on
// file descriptors (or its wanted cap, if smaller): below it, a few stuck
// clients would take every connection.
const minCap = 64

// Caps returns the cap on open connections of each listener of a process
// whose RLIMIT_NOFILE soft limit is nofile, in the order of want, the caps
// they would have: each its want while all of them and Reserve fit in
// nofile. Otherwise each keeps min(want, 64) and the room left is shared
// in proportion to what each wants beyond that, so that together they
// fit (unless even those floors do not). When the limit runs out, accept
// fails with EMFILE on every listener of the process, not only on the one
// that took the descriptors: a flood of one listener would lock Docker out
// of the plugin socket.
func Caps(nofile uint64, want ...int) []int {
	var total, floors uint64
	for _, w := range want {
		total += uint64(w)
		floors += uint64(min(w, minCap))
	}
	room := uint64(0)
	if nofile > Reserve {
		room = nofile - Reserve
	}
	caps := make([]int, len(want))
	for i, w := range want {
		switch f := min(w, minCap); {
		case room >= total:
			caps[i] = w
		case room <= floors:
			caps[i] = f
		default:
			caps[i] = f + int(uint64(w-f)*(room-floors)/(total-floors))
		}
	}
	return caps
}

// ProcessFDs is this process's RLIMIT_NOFILE soft limit (Go raises it to
// the hard limit at start), or no limit when it cannot be read.
func ProcessFDs() uint64 {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return math.MaxUint64
	}
	return rl.Cur
}
